package orchestrator

import (
	"slices"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// The workspace is on a volume of its own unless a disk limit holds the
// writable layer (a volume is outside it); a read-only root keeps the
// user's home writable too.
func TestScratchPathsPutTheWorkspaceOnAVolume(t *testing.T) {
	for _, tc := range []struct {
		readOnly bool
		disk     int64
		want     []string
	}{
		{false, 0, []string{contract.DefaultWorkspace}},
		{false, 1 << 30, nil},
		{true, 0, []string{contract.DefaultWorkspace, "/home/aimi"}},
		{true, 1 << 30, []string{contract.DefaultWorkspace, "/home/aimi"}},
	} {
		if got := scratchPaths(tc.readOnly, tc.disk); !slices.Equal(got, tc.want) {
			t.Errorf("read-only %v, disk %d: %q, want %q", tc.readOnly, tc.disk, got, tc.want)
		}
	}
}
