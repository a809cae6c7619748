package runner

import (
	"context"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// TestLargePushGoesThroughTheRelay: a push past git's http.postBuffer (git
// sends it chunked) goes through the relay to the repository intact.
func TestLargePushGoesThroughTheRelay(t *testing.T) {
	s := newScenario(t, oneStory(t), "tok-big")
	s.cfg.Agent = AgentExec
	s.cfg.AgentCommand = `head -c 6000000 /dev/urandom > big.bin`
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	// Compared by blob id and size: Show's output is trimmed, so random
	// data ending in a whitespace byte read one byte short.
	local := gitOut(t, s.cfg.Workspace, "rev-parse", "HEAD:big.bin")
	remote := gittest.Git(t, s.srv.Bare, "rev-parse", s.branch+":big.bin")
	size := gittest.Git(t, s.srv.Bare, "cat-file", "-s", remote)
	if remote != local || size != "6000000" {
		t.Fatalf("big.bin on the pushed branch is blob %s of %s bytes, want the local blob %s of 6000000", remote, size, local)
	}
}
