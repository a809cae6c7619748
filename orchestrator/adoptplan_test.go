package orchestrator

import (
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// The adoption rules as plans printed, without an engine or files.
func TestAdoptionPlan(t *testing.T) {
	running := engine.Info{Running: true, Status: "running"}
	created := engine.Info{Status: "created"}
	exited := engine.Info{Status: "exited", ExitCode: 3}
	paused := engine.Info{Running: true, Status: "paused"}
	pending, done := state.StatusPending, state.StatusCompleted
	cases := []struct {
		name    string
		local   bool
		entries []entryFacts
		want    string
	}{
		{"nothing to adopt", false, nil, ""},
		{"an entry of neither a container nor a journal is another tool's", false,
			[]entryFacts{{name: "a"}}, "a: leave (not made by aimid)"},
		{"a foreign container is kept and reported", false,
			[]entryFacts{{name: "a", found: false, journal: true, foreign: "labels name another swarm"}}, "a: keep (labels name another swarm)"},
		{"running containers are re-attached before pending ones start, decided ones first", false,
			[]entryFacts{
				{name: "p", found: true, journal: true, info: created, status: pending},
				{name: "x", found: true, journal: true, info: exited, status: state.StatusRunning},
				{name: "r", found: true, journal: true, info: running, status: state.StatusRunning},
				{name: "m", journal: true, status: state.StatusRunning},
				{name: "z", found: true, journal: true, info: paused, status: state.StatusRunning},
			},
			"m: decide missing\nz: decide stopped\nr: launch attach\nx: launch finish\np: launch start"},
		{"a stop asked while no daemon watched reaches the supervisor", false,
			[]entryFacts{{name: "a", found: true, journal: true, info: running, status: state.StatusRunning, stopAsked: true}},
			"a: launch attach, stop asked"},
		{"a terminal entry is only tracked, even with a stop asked", false,
			[]entryFacts{{name: "a", found: true, journal: true, info: exited, status: done, stopAsked: true}, {name: "b", journal: true, status: state.StatusFailed}},
			"a: done (completed)\nb: done (failed)"},
		{"local mode: an unpublished completed branch is settled last, the network is needed for the rest", true,
			[]entryFacts{
				{name: "c", found: true, journal: true, info: exited, status: done},
				{name: "d", found: true, journal: true, info: exited, status: done, published: true},
				{name: "p", found: true, journal: true, info: created, status: pending},
			},
			"network: ensure\nd: done (completed)\np: launch start\nc: settle (branch not published)"},
		{"local mode with nothing left to run needs no network", true,
			[]entryFacts{{name: "c", found: true, journal: true, info: exited, status: done}},
			"c: settle (branch not published)"},
		{"remote mode never settles", false,
			[]entryFacts{{name: "c", found: true, journal: true, info: exited, status: done}},
			"c: done (completed)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.TrimSuffix(planAdoption(tc.local, tc.entries).String(), "\n")
			if got != tc.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
