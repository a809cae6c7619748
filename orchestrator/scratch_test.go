package orchestrator

import (
	"slices"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// The workspace is on a volume of its own unless a disk limit holds the
// writable layer (a volume is outside it); a read-only root keeps the
// user's home writable too. A workspace image's sandbox keeps its
// workspace in its writable layer: a volume would copy the image's tree.
func TestScratchPathsPutTheWorkspaceOnAVolume(t *testing.T) {
	for _, tc := range []struct {
		readOnly  bool
		disk      int64
		prefilled bool
		want      []string
	}{
		{false, 0, false, []string{contract.DefaultWorkspace}},
		{false, 1 << 30, false, nil},
		{false, 0, true, nil},
		{true, 0, false, []string{contract.DefaultWorkspace, "/home/aimi"}},
		{true, 1 << 30, false, []string{contract.DefaultWorkspace, "/home/aimi"}},
	} {
		if got := scratchPaths(tc.readOnly, tc.disk, tc.prefilled); !slices.Equal(got, tc.want) {
			t.Errorf("read-only %v, disk %d: %q, want %q", tc.readOnly, tc.disk, got, tc.want)
		}
	}
}
