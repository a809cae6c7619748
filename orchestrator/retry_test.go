package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// TestRetryFailedRerunsTheFailedStoriesOfACompletedContainer: a chain
// US-001 <- US-002 <- US-003 whose first run completes with US-002 failed
// and US-003 skipped behind it. The view says completed with failures;
// resume without --retry-failed leaves it; with it, the rerun (whose
// runner, from the branch, retries US-002 and reopens US-003) is folded
// from a fold that has US-001 done and US-003 pending, and ends completed
// without failures, also as a restarted daemon restores it.
func TestRetryFailedRerunsTheFailedStoriesOfACompletedContainer(t *testing.T) {
	attempt := map[string]int{} // guarded by eng.mu: programs is called under it
	repo, files := testRepo(t, []string{"partly"}, 3)
	eng := newFakeEngine(nil)
	eng.programs = func(s engine.Spec) program {
		attempt[s.Labels[contract.LabelTaskFile]]++
		if attempt[s.Labels[contract.LabelTaskFile]] == 1 {
			return scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "completed"},
				step{story: "US-002", status: "in_progress"}, step{story: "US-002", status: "failed"},
				step{story: "US-003", status: "skipped"}, step{complete: "completed"})
		}
		return scripted(0, step{story: "US-002", status: "in_progress"}, step{story: "US-002", status: "completed"},
			step{story: "US-003", status: "in_progress"}, step{story: "US-003", status: "completed"}, step{complete: "completed"})
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m1.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m1, repo, 10*time.Second)
	first := detail(t, v, "partly")
	if first.Status != "completed" || !first.CompletedWithFailures || v.Summary == nil || v.Summary.CompletedWithFailures != 1 {
		t.Fatalf("first run: %s, with failures %v, summary %+v; want completed with failures", first.Status, first.CompletedWithFailures, v.Summary)
	}
	if v, err = m1.Resume(ctx, repo, false); err != nil || detail(t, v, "partly").ContainerID != first.ContainerID {
		t.Fatalf("resume without --retry-failed reran it (or failed: %v)", err)
	}
	if _, err := m1.Resume(ctx, repo, true); err != nil {
		t.Fatal(err)
	}
	v = waitTerminal(t, m1, repo, 10*time.Second)
	if d := detail(t, v, "partly"); d.Status != "completed" || d.CompletedWithFailures || d.ContainerID == first.ContainerID || d.Rejected != 0 {
		t.Fatalf("rerun: %s in %s, with failures %v, %d rejected, errors %+v; want completed without failures in a new container",
			d.Status, d.ContainerID, d.CompletedWithFailures, d.Rejected, d.Errors)
	}
	if c := validateStateFile(t, repo).Containers[0]; c.StoryProgress != (state.Progress{Total: 3, Completed: 3}) {
		t.Fatalf("state after the rerun: %+v", c.StoryProgress)
	}
	crash(t, m1, cancel1)
	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	v = waitTerminal(t, m2, repo, 10*time.Second)
	if c := v.State.Containers[0]; c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: 3, Completed: 3}) || v.Summary.Completed != 1 {
		t.Fatalf("restored after a restart: %s %+v, summary %+v", c.Status, c.StoryProgress, v.Summary)
	}
}

// TestRetryFailedLeavesALandsOwnRuns: a land's fix-up (its task file under
// .aimi/tasks/land-fix-) whose story failed is not rerun by resume
// --retry-failed: the land that started it is over, and its next land
// starts a fix-up of its own.
func TestRetryFailedLeavesALandsOwnRuns(t *testing.T) {
	repo, files := testRepo(t, []string{"land-fix-aimi-x"}, 1)
	eng := newFakeEngine(nil)
	eng.programs = func(engine.Spec) program {
		return scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "failed"}, step{complete: "completed"})
	}
	m, err := New(context.Background(), Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	first := detail(t, waitTerminal(t, m, repo, 10*time.Second), "land-fix-aimi-x")
	if !first.CompletedWithFailures {
		t.Fatalf("the fix-up ended %s, want completed with failures", first.Status)
	}
	v, err := m.Resume(ctx, repo, true)
	if err != nil || detail(t, v, "land-fix-aimi-x").ContainerID != first.ContainerID {
		t.Errorf("resume --retry-failed reran the land's fix-up (or failed: %v)", err)
	}
}
