package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// A container that repeats its final error message (a replay the fold takes
// as harmless) must not grow what the daemon keeps and every status answer
// carries.
func TestRepeatedErrorMessagesStayBoundedInTheView(t *testing.T) {
	repo, files := testRepo(t, []string{"loud"}, 1)
	steps := make([]step, 0, 3001)
	for range 3000 {
		steps = append(steps, step{errCode: "AGENT_CRASH"})
	}
	steps = append(steps, exitStep(1))
	eng := newFakeEngine(byTask(nil, scripted(0, steps...)))
	m := newTestManager(t, eng, Config{})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 30*time.Second)
	d := detail(t, v, "loud")
	if d.Status != "failed" {
		t.Errorf("status = %s, want failed", d.Status)
	}
	if len(d.Errors) == 0 || len(d.Errors) > maxErrors+1 {
		t.Fatalf("%d errors in the view, want 1 to %d", len(d.Errors), maxErrors+1)
	}
	if d.Errors[0].Code != "AGENT_CRASH" {
		t.Errorf("first error = %+v, want the container's AGENT_CRASH", d.Errors[0])
	}
}
