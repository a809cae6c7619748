package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/state"
)

// TestSlowBudgetAnswersHoldTheStoryNotSkipTheBudget: a daemon that takes
// longer than the runner once waited (30 s) to answer the budget question
// (AIMI_TEST_BUDGET_DELAY, as after a restart or under load) makes each
// story wait for the answer, saying so in its status; the budget still
// stops the container after the first story, as with a prompt daemon.
func TestSlowBudgetAnswersHoldTheStoryNotSkipTheBudget(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b := startBudgetSwarmSetup(t, ctx, budgetConfig("2", "0"), budgetSetup{settings: []string{aimid.EnvBudgetDelay + "=35s"}})
	defer b.p.stop(t)
	journal := b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 2.0000 (swarm.budget", 3*float64(calls))
	})
	recs, err := state.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if m := string(r.Message); r.Type == "progress-update" && strings.Contains(m, `"status":"pending"`) &&
			strings.Contains(m, "US-001 waits for the daemon's answer to the budget question") {
			return
		}
	}
	t.Fatalf("no status said that US-001 waited for the budget answer")
}

// buildBudgetAgent builds cmd/aimid/internal/budgetagent for the sandbox.
func buildBudgetAgent(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "budgetagent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/aimi-tools/swarm/cmd/aimid/internal/budgetagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the budget agent: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// budgetAgentConfig is budgetConfig with the budget agent and its
// settings (agent.env) instead of the shell agent; extra lines go under
// swarm.
func budgetAgentConfig(swarmBudget, storyBudget string, agentEnv map[string]string, swarmExtra ...string) string {
	var env strings.Builder
	for k, v := range agentEnv {
		fmt.Fprintf(&env, "    %s: %q\n", k, v)
	}
	swarm := "swarm:\n  budget: " + swarmBudget + "\n"
	for _, l := range swarmExtra {
		swarm += "  " + l + "\n"
	}
	return "agent:\n  kind: acp\n  command: ./budgetagent\n  story_budget: " + storyBudget + "\n  env:\n    ANTHROPIC_API_KEY: sk-ant-budget-test\n" + env.String() +
		"git:\n  mode: local\n" + swarm +
		"models:\n  anthropic:\n    prices: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}\n"
}

// TestHeldBudgetSocketDoesNotSwitchTheBudgetOff: the agent starts a process
// of its own session that outlives its story and holds the container's
// budget socket (connections that send a request's head and never its
// body, more of them than the daemon serves at once, opened again as they
// are closed). The runner's question at the next story boundary is still
// answered: the container stops at its budget after the first story like
// an honest one, instead of going on without budgets.
func TestHeldBudgetSocketDoesNotSwitchTheBudgetOff(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The story lasts longer than the daemon kept the runner's idle
	// connection of its first question (which, reused, would pass the
	// holder by), as a real story does.
	cfg := budgetAgentConfig("2", "0", map[string]string{"BUDGETAGENT_HOLD": "75s"})
	b := startBudgetSwarmSetup(t, ctx, cfg, budgetSetup{files: map[string][]byte{"budgetagent": buildBudgetAgent(t)}})
	defer b.p.stop(t)
	journal := b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 2.0000 (swarm.budget", 3*float64(calls))
	})
	if !journalHas(t, journal, "budgetagent: holder started") {
		t.Fatalf("the agent started no holder")
	}
	if logs := b.p.logs(); !strings.Contains(logs, "gave its place to a new one") {
		t.Errorf("the daemon's log shows no held connection giving its place")
	}
}

// journalHas reports whether a record of the journal holds text.
func journalHas(t *testing.T, journal, text string) bool {
	t.Helper()
	recs, err := state.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.Contains(string(r.Message), text) || strings.Contains(r.Raw, text) {
			t.Logf("journal: %s%.300s", r.Message, r.Raw)
			return true
		}
	}
	for _, r := range recs {
		t.Logf("journal: %s %s %.300s", r.Type, r.Message, r.Raw)
	}
	return false
}
