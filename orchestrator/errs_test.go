package orchestrator

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/safefile"
	"github.com/aimi-tools/swarm/state"
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

// A journal that is not a regular file of the repository (a FIFO, a link
// out) gets an answer that says so, not an empty log.
func TestJournalThatIsNoRegularFileIsAnError(t *testing.T) {
	repo, files := testRepo(t, []string{"quiet"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	ctx := context.Background()
	v, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 30*time.Second)
	name := detail(t, v, "quiet").Name
	path := state.Open(repo).JournalPath(contract.Sandbox{Swarm: v.State.SwarmID, Container: name})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ch, err := m.Journal(ctx, api.LogsRequest{RepoPath: repo, Name: name})
	if err == nil {
		n := 0
		for range ch {
			n++
		}
		t.Fatalf("Journal of a FIFO answered %d records and no error", n)
	}
	if !errors.Is(err, safefile.ErrNotRegular) {
		t.Errorf("Journal = %v, want it to say the journal is not a regular file", err)
	}
}
