package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// TestBudgetIsAHardCapAtTheGateway: an agent that keeps calling the model
// within one story (up to ten calls of cost 3) against swarm.budget 5 and
// the default grace of 10 %. Once the swarm's spend is past 5.5 the model
// gateway refuses the container's calls with HTTP 402 and a provider-style
// billing error naming BUDGET_EXCEEDED, so the story cannot spend without
// bound; the story ends cut off by the budget (not failed), its work so
// far committed, as a story a stop cut off (in progress in the state,
// pending in the task file), and the container stops with
// BUDGET_EXCEEDED. With the budget raised, `aimi swarm resume` goes on
// from that work and completes both stories.
func TestBudgetIsAHardCapAtTheGateway(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	agentEnv := map[string]string{"BUDGETAGENT_CALLS": "10"}
	b := startBudgetSwarmSetup(t, ctx, budgetAgentConfig("5", "0", agentEnv), budgetSetup{files: map[string][]byte{"budgetagent": buildBudgetAgent(t)}})
	defer b.p.stop(t)
	v := waitFor(t, b.sock, b.repo, 4*time.Minute, "the container exited", allExited)
	calls := b.calls.Load()
	// The refusal comes at the first call after the spend passed 5.5: the
	// third, or the fourth when the second's cost was counted a moment
	// after its answer reached the agent.
	if calls < 2 || calls > 3 {
		t.Fatalf("the provider got %d calls, want 2 or 3 (refused past 5.5 at 3 each)", calls)
	}
	c := stoppedContainer(t, b)
	if c.StoryProgress.Completed != 0 || c.StoryProgress.Failed != 0 || c.StoryProgress.InProgress != 1 || c.StoryProgress.Pending != 1 {
		t.Fatalf("stories %+v, want US-001 cut off in progress, US-002 pending, none failed", c.StoryProgress)
	}
	if w := fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 5.0000 (swarm.budget", 3*float64(calls)); !viewHasError(v, c.ContainerName, w) {
		t.Fatalf("want %q in the errors of %s: %+v", w, c.ContainerName, v.Containers)
	}
	if err := os.WriteFile(filepath.Join(b.dataDir, "cfg", "config.yaml"), []byte(budgetAgentConfig("1000", "0", agentEnv)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := aimi(ctx, "swarm", "resume", "--repo", b.repo, "--socket", b.sock); code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, b.sock, b.repo, 4*time.Minute, "the resumed container completed", func(v api.SwarmView) bool {
		return allExited(v) && len(v.State.Containers) == 1 && v.State.Containers[0].Status == state.StatusCompleted
	})
	waitBranch(t, b.repo, b.branch, 2*time.Minute)
	subjects := gitOut(t, b.repo, "log", "--reverse", "--format=%s", "main.."+b.branch)
	if !strings.Contains(subjects, "US-001: Story 1 (work so far; BUDGET_EXCEEDED)") || !strings.Contains(subjects, "US-001: Story 1 (completed)") ||
		!strings.Contains(subjects, "US-002: Story 2 (completed)") {
		t.Fatalf("branch %s: %s", b.branch, subjects)
	}
	refusal := gitOut(t, b.repo, "show", b.branch+":refusal.txt")
	if !strings.HasPrefix(refusal, "402 ") || !strings.Contains(refusal, `"type":"billing_error"`) || !strings.Contains(refusal, "BUDGET_EXCEEDED: the swarm spent") {
		t.Fatalf("the agent was refused with %q, want HTTP 402 and a billing_error naming BUDGET_EXCEEDED", refusal)
	}
	// The work so far was kept: the rerun appended to it.
	if work := gitOut(t, b.repo, "show", b.branch+":work.txt"); strings.Count(work, "answered") < int(calls)-1+20 {
		t.Fatalf("work.txt:\n%s\nwant the first run's calls and both stories' after the resume", work)
	}
}

// stoppedContainer is b's container once the state file says stopped.
func stoppedContainer(t *testing.T, b *budgetRun) *state.Container {
	t.Helper()
	var c *state.Container
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c = validState(t, b.repo).ContainerForTask(taskPath(b.name))
		if c != nil && c.Status == state.StatusStopped || time.Now().After(deadline) {
			break
		}
	}
	if c == nil || c.Status != state.StatusStopped {
		t.Fatalf("container %+v, want stopped", c)
	}
	return c
}
