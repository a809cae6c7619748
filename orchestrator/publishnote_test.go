package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// refusingPublisher is a Publisher that refuses every publish, as the
// real one does for a branch checked out in the user's checkout.
type refusingPublisher struct {
	*fakeGit
	mu    sync.Mutex
	calls int
}

const refusal = "publish feat: branch is checked out in /home/u/repo, so the branch is not moved; the container's commits are kept at refs/aimi/unpublished/s/feat"

func (p *refusingPublisher) Publish(ctx context.Context, cb contract.ContainerBranch) (*string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return nil, errors.New(refusal)
}

func (p *refusingPublisher) called() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// A refused publish is the daemon's PUBLISH_FAILED note in the journal:
// logs and status show it, the container stays completed, and the next
// daemon, which publishes again and is refused again, shows it once and
// journals it once.
func TestARefusedPublishIsJournaledOnceAndOutlivesTheDaemon(t *testing.T) {
	repo, files := testRepo(t, []string{"refused"}, 1)
	eng := newFakeEngine(func(engine.Spec) program { return scripted(0, storiesDone(1)...) })
	git := &fakeGit{}
	pub := &refusingPublisher{fakeGit: git}
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t), Git: git, Publisher: pub}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m1, repo, 10*time.Second)
	check := func(v api.SwarmView, publishes int) {
		t.Helper()
		d := v.Containers[0]
		var notes int
		for _, e := range d.Errors {
			if e.Code == acpmsg.CodePublishFailed && e.Message == refusal {
				notes++
			}
		}
		if d.Status != string(state.StatusCompleted) || notes != 1 {
			t.Fatalf("%s: %s with errors %+v; want completed with the refusal once", d.Name, d.Status, d.Errors)
		}
		var journaled int
		for _, r := range readJournal(t, repo, v.State.SwarmID, d.Name) {
			if r.Stream == state.StreamDaemon && strings.Contains(string(r.Message), acpmsg.CodePublishFailed) {
				if r.Rejected != "" {
					t.Fatalf("the note was journaled as rejected: %s", r.Rejected)
				}
				journaled++
			}
		}
		if journaled != 1 || pub.called() != publishes {
			t.Fatalf("%d PUBLISH_FAILED records in the journal after %d publishes, want 1 after %d", journaled, pub.called(), publishes)
		}
		if st := validateStateFile(t, repo).Containers[0].Status; st != state.StatusCompleted {
			t.Fatalf("state file: %s, want completed", st)
		}
	}
	check(v, 1)

	crash(t, m1, cancel1)
	m2 := newTestManager(t, eng, Config{Git: git, Publisher: pub})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the recovered daemon to publish the unpublished branch again", func() error {
		if n := pub.called(); n < 2 || !settled(m2, repo) {
			return fmt.Errorf("%d publishes, settled %v", n, settled(m2, repo))
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	v, err = m2.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	check(v, 2)
}
