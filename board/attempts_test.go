package board

import (
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// TestBoardGroupsAttemptsAndMarksThePick: a task file run three times is
// one group on the page, its line as status says it, the picked attempt
// marked there and on its card; a task file run once gets no mark.
func TestBoardGroupsAttemptsAndMarksThePick(t *testing.T) {
	now := time.Now().UTC()
	entry := func(name, tf string) *state.Container {
		return &state.Container{ContainerID: "0123456789ab", ContainerName: name, TaskFilePath: tf, BranchName: "feat/x", Status: state.StatusCompleted, CreatedAt: now, UpdatedAt: now}
	}
	v := api.SwarmView{RepoPath: "/r", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{
		entry("aimi-x-a1", "x"), entry("aimi-x-a2", "x"), entry("aimi-y", "y")}},
		Attempts: []*state.AttemptSet{{TaskFilePath: "x", BranchName: "feat/x", Attempts: []state.Attempt{
			{Attempt: 1, ContainerName: "aimi-x-a1"}, {Attempt: 2, ContainerName: "aimi-x-a2", Qualified: true, KeptRef: "refs/aimi/attempts/s/aimi-x-a2\x1b[2J"}},
			Pick: &state.AttemptPick{Attempt: 2, ContainerName: "aimi-x-a2", Reason: "verified; the only one of 2", By: state.PickByDaemon}}}}
	s := boardSwarm(v)
	if len(s.Attempts) != 1 || s.Attempts[0].Line != "feat/x: attempt 2 of 2 picked (verified; the only one of 2)" {
		t.Fatalf("attempts %+v", s.Attempts)
	}
	if a := s.Attempts[0].Attempts; !a[1].Picked || a[0].Picked || strings.Contains(a[1].KeptRef, "\x1b") {
		t.Errorf("attempts %+v: want the second marked and the ref cleaned", a)
	}
	marks := map[string]*bool{}
	for _, c := range s.Containers {
		marks[c.Name] = c.Picked
	}
	if marks["aimi-x-a2"] == nil || !*marks["aimi-x-a2"] || marks["aimi-x-a1"] == nil || *marks["aimi-x-a1"] || marks["aimi-y"] != nil {
		t.Errorf("card marks %v", marks)
	}
}
