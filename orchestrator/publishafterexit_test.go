package orchestrator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestFinishedOnlyOnceTheDaemonIsDoneWithTheContainer: a container is
// terminal by its completion while its process still runs; the view says
// Finished only after the process exited and its branch was published, so
// that `start --follow` returns with the branches in the checkout.
func TestFinishedOnlyOnceTheDaemonIsDoneWithTheContainer(t *testing.T) {
	repo, files := testRepo(t, []string{"fin"}, 1)
	release := make(chan struct{})
	inner := scripted(0, storiesDone(1)...)
	eng := newFakeEngine(func(engine.Spec) program {
		return func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
			code, oom := inner(ctx, stdin, emit, term) // ends with the completion line
			select {
			case <-release: // the runner lingers after its completion
			case <-ctx.Done():
			}
			return code, oom
		}
	})
	git := &fakeGit{}
	m := newTestManager(t, eng, Config{Git: git, Publisher: git})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	testwait.Eventually(t, time.Until(deadline), "every container terminal", func() error {
		v, err := m.Status(ctx, repo)
		if err != nil || !allTerminal(v) {
			return fmt.Errorf("%v %v", describe(v), err)
		}
		if v.Containers[0].Finished {
			t.Fatal("Finished while the container's process still runs and nothing was published")
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	close(release)
	testwait.Eventually(t, time.Until(deadline), "the first container finished", func() error {
		v, err := m.Status(ctx, repo)
		if err != nil || !v.Containers[0].Finished {
			return fmt.Errorf("%v %v", describe(v), err)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	git.mu.Lock()
	published := len(git.published)
	git.mu.Unlock()
	if published != 1 {
		t.Fatalf("Finished before the branch was published (published %d)", published)
	}
}

// TestRecoverPublishesWhatADaemonThatDiedTooEarlyDidNot: the daemon dies
// after folding a container's completion and before publishing its branch
// (the runner lingers after its completion). The next daemon finds the
// container terminal but unpublished: it waits for the exit and publishes.
// A container whose branch was published is not published again.
func TestRecoverPublishesWhatADaemonThatDiedTooEarlyDidNot(t *testing.T) {
	repo, files := testRepo(t, []string{"late", "done"}, 1)
	release := make(chan struct{})
	inner := scripted(0, storiesDone(1)...)
	eng := newFakeEngine(byTask(map[string]program{
		"late": func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
			code, oom := inner(ctx, stdin, emit, term)
			<-release // outlives the first daemon
			return code, oom
		},
	}, scripted(0, storiesDone(1)...)))
	git := &fakeGit{}
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t), Git: git, Publisher: git}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	waitTerminalAndOnePublished(t, m1, git, repo, deadline)
	crash(t, m1, cancel1)
	late, lateID, done := "", "", git.publishedNow()[0]
	for _, c := range validateStateFile(t, repo).Containers {
		if c.ContainerName != done {
			late, lateID = c.ContainerName, c.ContainerID
		}
	}
	waiters := func() int {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		return len(eng.get(lateID).waiters)
	}
	before := waiters()
	early := watchEarlyPublishes(git, release, late)
	m2 := newTestManager(t, eng, Config{Git: git, Publisher: git})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The new daemon waits for late's exit before it lets it go.
	for waiters() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the recovered daemon never waited for %s's exit", late)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	for {
		v, err := m2.Status(context.Background(), repo)
		finished := err == nil && len(v.Containers) == 2 && v.Containers[0].Finished && v.Containers[1].Finished
		if p := git.publishedNow(); finished && len(p) == 2 {
			if p[1] != late {
				t.Fatalf("published %v, want %s published once more after the restart", p, late)
			}
			if name := early.Load(); name != nil {
				t.Fatalf("%s was published while %s still ran", name, late)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after recovery: %v published %v", describe(v), git.publishedNow())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watchEarlyPublishes records the first publish that should not have
// happened: one of late before release is closed (its process still ran)
// or any of another container (which was published already, so it would
// be a second one). The returned value stays nil while none happened.
func watchEarlyPublishes(git *fakeGit, release <-chan struct{}, late string) *atomic.Value {
	var early atomic.Value
	git.mu.Lock()
	defer git.mu.Unlock()
	git.onPublish = func(name string) {
		select {
		case <-release:
			if name == late {
				return
			}
		default:
		}
		early.CompareAndSwap(nil, name)
	}
	return &early
}

// waitTerminalAndOnePublished waits until deadline for every container of
// repo to be terminal and one of them published.
func waitTerminalAndOnePublished(t *testing.T, m *Manager, git *fakeGit, repo string, deadline time.Time) {
	t.Helper()
	testwait.Eventually(t, time.Until(deadline), "both terminal and one published", func() error {
		v, err := m.Status(context.Background(), repo)
		if err != nil || !allTerminal(v) || len(git.publishedNow()) != 1 {
			return fmt.Errorf("%v (%v) published %v", describe(v), err, git.publishedNow())
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
}
