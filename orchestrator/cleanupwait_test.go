package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// A forced cleanup whose engine does not answer the removes returns within
// CleanupWait (not a remove's own deadline per container) with an error
// naming every container it left; the state file still lists them, and a
// later cleanup --force on an engine that answers removes them.
func TestCleanupForceIsBoundedAsAWhole(t *testing.T) {
	repo, files := testRepo(t, []string{"one", "two"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	const wait = 500 * time.Millisecond
	m := newTestManager(t, eng, Config{CleanupWait: wait})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, time.Minute)
	eng.removeHangs = make(chan struct{})
	t0 := time.Now()
	_, err := m.Cleanup(ctx, repo, true)
	took := time.Since(t0)
	if err == nil {
		t.Fatal("cleanup --force on an engine that does not answer succeeded")
	}
	for _, d := range v.Containers {
		if !strings.Contains(err.Error(), d.Name) {
			t.Errorf("the error does not name %s, which was left: %v", d.Name, err)
		}
	}
	if !strings.Contains(err.Error(), "within "+wait.String()) {
		t.Errorf("the error does not say the bound: %v", err)
	}
	if took > wait+5*time.Second {
		t.Errorf("cleanup --force took %s, want about CleanupWait (%s)", took, wait)
	}
	if sw := validateStateFile(t, repo); len(sw.Containers) != 2 {
		t.Fatalf("the state lists %d containers after the late cleanup, want the 2 it left", len(sw.Containers))
	}
	close(eng.removeHangs)
	eng.removeHangs = nil
	rep, err := m.Cleanup(ctx, repo, true)
	if err != nil || len(rep.Removed) != 2 || !rep.StateRemoved {
		t.Fatalf("second cleanup --force: %+v, %v; want both removed and the state gone", rep, err)
	}
}

// A forced cleanup waiting for the repository behind another command (a
// stop the engine never answers) gives up within CleanupWait and says why.
func TestCleanupForceDoesNotWaitWithoutEndForTheRepository(t *testing.T) {
	repo, files := testRepo(t, []string{"stuck"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true})))
	eng.stopHangs = make(chan struct{})
	const wait = 300 * time.Millisecond
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond, StopWait: time.Minute, CleanupWait: wait})
	t.Cleanup(func() { close(eng.stopHangs) }) // before the manager's shutdown
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(time.Minute, func() bool { return eng.runningNow() >= 1 }) {
		t.Fatal("the container is not running after a minute")
	}
	stopCtx, cancelStop := context.WithCancel(context.Background())
	defer cancelStop()
	go func() { _, _ = m.Stop(stopCtx, repo, nil) }()
	if !waitUntil(time.Minute, func() bool { eng.mu.Lock(); defer eng.mu.Unlock(); return eng.stopsHung > 0 }) {
		t.Fatal("the stop never reached the engine")
	}
	t0 := time.Now()
	_, err := m.Cleanup(context.Background(), repo, true)
	if took := time.Since(t0); took > wait+5*time.Second {
		t.Fatalf("cleanup --force took %s behind a hung stop, want about CleanupWait (%s)", took, wait)
	}
	if err == nil || !strings.Contains(err.Error(), "within "+wait.String()) {
		t.Fatalf("cleanup --force = %v, want an error saying it did not finish within %s", err, wait)
	}
}

// A cleanup removes its containers several at once: on a cluster each
// removal waits seconds for its service and objects.
func TestCleanupRemovesContainersAtOnce(t *testing.T) {
	repo, files := testRepo(t, []string{"one", "two", "three", "four"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, time.Minute)
	eng.removeHangs = make(chan struct{})
	type result struct {
		rep api.CleanupReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := m.Cleanup(ctx, repo, false)
		done <- result{rep, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for eng.removesWaiting.Load() < 4 {
		if time.Now().After(deadline) {
			close(eng.removeHangs)
			t.Fatalf("%d of 4 removals under way at once after 10 s, want all 4", eng.removesWaiting.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(eng.removeHangs)
	r := <-done
	if r.err != nil || len(r.rep.Removed) != 4 || !r.rep.StateRemoved {
		t.Fatalf("cleanup: %+v, %v; want all 4 removed and the state gone", r.rep, r.err)
	}
}
