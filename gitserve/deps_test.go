package gitserve

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServesGitOnly: the git service neither opens an engine client of its
// own (the daemon gives it the tip probe) nor publishes (package publish
// does, wired by aimid).
func TestServesGitOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/docker/") || dep == "github.com/aimi-tools/swarm/publish" {
			t.Errorf("gitserve depends on %s", dep)
		}
	}
}
