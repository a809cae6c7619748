package orchestrator

import (
	"slices"
	"testing"

	"github.com/aimi-tools/swarm/state"
)

func swarmOf(statuses ...state.ContainerStatus) *state.Swarm {
	sw := &state.Swarm{SwarmID: "s"}
	for i, st := range statuses {
		sw.Containers = append(sw.Containers, &state.Container{ContainerName: []string{"a", "b"}[i], Status: st})
	}
	return sw
}

// A stop is another tool's only when the daemon's view on both sides of
// the file's read has the container pending or running: a resume between
// them (the daemon's own "stopped" still in the file it read, the
// container reopened after) is not one, nor a container that stopped
// itself after the read.
func TestForeignStopNeedsTheDaemonsViewOnBothSidesOfTheRead(t *testing.T) {
	never := func(string) bool { return false }
	for _, tc := range []struct {
		name                string
		before, file, after state.ContainerStatus
		want                bool
	}{
		{"another tool stopped a running container", state.StatusRunning, state.StatusStopped, state.StatusRunning, true},
		{"a resume reopened it while the file was read", state.StatusStopped, state.StatusStopped, state.StatusPending, false},
		{"it stopped itself just after the read", state.StatusRunning, state.StatusStopped, state.StatusStopped, false},
		{"the file says running", state.StatusRunning, state.StatusRunning, state.StatusRunning, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := foreignStopNames(swarmOf(tc.before), swarmOf(tc.file), swarmOf(tc.after), never)
			if want := tc.want; (len(got) == 1) != want {
				t.Fatalf("foreign stops %v, want a stop: %v", got, want)
			}
		})
	}
	asked := func(name string) bool { return name == "a" }
	if got := foreignStopNames(swarmOf(state.StatusRunning, state.StatusPending), swarmOf(state.StatusStopped, state.StatusStopped),
		swarmOf(state.StatusRunning, state.StatusPending), asked); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("foreign stops %v, want only b (a's stop was asked for)", got)
	}
}
