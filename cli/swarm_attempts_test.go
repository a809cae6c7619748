package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

func TestUsageTotalsEachTaskFilesAttempts(t *testing.T) {
	v := api.SwarmView{Attempts: []*state.AttemptSet{{TaskFilePath: "x", BranchName: "feat/x", Attempts: []state.Attempt{
		{Attempt: 1, ContainerName: "aimi-x-a1"}, {Attempt: 2, ContainerName: "aimi-x-a2"}}}}}
	cs := []ContainerUsage{
		{Name: "aimi-x-a1", Totals: UsageTotals{Calls: 2, Cost: 0.5}},
		{Name: "aimi-x-a2", Totals: UsageTotals{Calls: 3, Cost: 0.25}},
		{Name: "aimi-y", Totals: UsageTotals{Calls: 1, Cost: 1}},
	}
	rep := UsageReport{Containers: cs, Attempts: attemptsUsage(v, cs)}
	if len(rep.Attempts) != 1 || rep.Attempts[0].Calls != 5 || rep.Attempts[0].Cost != 0.75 {
		t.Fatalf("attempts usage %+v", rep.Attempts)
	}
	var b bytes.Buffer
	printUsage(&b, rep)
	if !strings.Contains(b.String(), "feat/x (2 attempts)") || !strings.Contains(b.String(), "0.7500") {
		t.Errorf("usage table lacks the attempts' total:\n%s", b.String())
	}
}

// TestFollowIgnoresTheAttemptsThePickBeat: --follow ends 0 when the only
// failures are attempts another attempt of their task file was picked
// over, 1 when no attempt was picked.
func TestFollowIgnoresTheAttemptsThePickBeat(t *testing.T) {
	entry := func(name string, failed int) *state.Container {
		return &state.Container{ContainerName: name, Status: state.StatusCompleted, StoryProgress: state.Progress{Total: 1, Completed: 1 - failed, Failed: failed}}
	}
	set := &state.AttemptSet{BranchName: "feat/x", Attempts: []state.Attempt{{Attempt: 1, ContainerName: "a1"}, {Attempt: 2, ContainerName: "a2"}},
		Pick: &state.AttemptPick{Attempt: 2, ContainerName: "a2"}}
	v := api.SwarmView{State: &state.Swarm{Containers: []*state.Container{entry("a1", 1), entry("a2", 0)}}, Attempts: []*state.AttemptSet{set}}
	if err := followOutcome(v); err != nil {
		t.Fatalf("a beaten attempt's failure ended follow with %v", err)
	}
	set.Pick = &state.AttemptPick{Reason: "none of 2 attempts verified"}
	if err := followOutcome(v); err == nil {
		t.Fatal("no pick, a failed attempt: follow ended 0")
	}
	if len(v.State.Containers) != 2 {
		t.Fatal("withoutLosers changed the view")
	}
}

// TestStatusShowsTheAttempts: status groups a task file's attempts under
// its pick line, marks the pick, and names where each one's commits are
// kept; text from the state is made safe for the terminal.
func TestStatusShowsTheAttempts(t *testing.T) {
	score, lines := 0.91, 1204
	v := api.SwarmView{
		Containers: []api.ContainerDetail{{Name: "aimi-x-a1", Status: "completed"}, {Name: "aimi-x-a2", Status: "completed"}},
		Attempts: []*state.AttemptSet{{BranchName: "feat/x", Attempts: []state.Attempt{
			{Attempt: 1, ContainerName: "aimi-x-a1", KeptRef: "refs/aimi/attempts/s/aimi-x-a1", StoppedEarly: true},
			{Attempt: 2, ContainerName: "aimi-x-a2", Qualified: true, Score: &score, Lines: &lines, KeptRef: "refs/aimi/attempts/s/aimi-x-a2", Variant: "red\x1b[2J"}},
			Pick: &state.AttemptPick{Attempt: 2, ContainerName: "aimi-x-a2", Reason: "verified; score 0.91 vs 0.85; 1,204 vs 1,877 lines", By: state.PickByDaemon}}},
	}
	var b bytes.Buffer
	printAttempts(&b, v)
	out := b.String()
	for _, want := range []string{
		"feat/x: attempt 2 of 2 picked (verified; score 0.91 vs 0.85; 1,204 vs 1,877 lines)",
		"* aimi-x-a2", "verified, score 0.91, 1,204 lines, kept at refs/aimi/attempts/s/aimi-x-a2",
		"aimi-x-a1", "stopped once another qualified, kept at refs/aimi/attempts/s/aimi-x-a1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	t.Log("\n" + out)
}
