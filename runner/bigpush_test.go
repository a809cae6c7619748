package runner

import (
	"context"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
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
	local := gitOut(t, s.cfg.Workspace, "rev-parse", "HEAD:big.bin")
	if got := s.srv.Show(t, s.branch, "big.bin"); len(got) != 6000000 {
		t.Fatalf("big.bin on the pushed branch has %d bytes (local blob %s)", len(got), local)
	}
}
