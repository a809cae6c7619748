package board

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// walkStrings calls fn with every string in a decoded JSON value.
func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case map[string]any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	}
}

// Task file paths and branch names come from the repository's files: a
// committed name can hold a bidi override (git's ref rules allow one), and
// the page shows it as it shows a container's output.
func TestSwarmViewCarriesNoControlOrBidiFromTheRepository(t *testing.T) {
	hostile := "\u202egnp.\u0085\u009b2J"
	v := api.SwarmView{RepoPath: "/repo", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{{
		ContainerName: "aimi-a", TaskFilePath: ".aimi/tasks/a" + hostile + "-tasks.json", BranchName: "feat/" + hostile,
		Status: state.StatusRunning,
	}}}, Containers: []api.ContainerDetail{{Name: "aimi-a", Node: hostile, LastOutput: hostile}}}
	b, err := json.Marshal(boardSwarm(v))
	if err != nil {
		t.Fatal(err)
	}
	var decoded any
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	walkStrings(decoded, func(s string) {
		for _, r := range s {
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Errorf("%U reaches the page in %q", r, s)
			}
		}
	})
}

// A container whose model calls wait at the gateway carries the wait's
// words to its card, cleaned like any text; the journal shows the
// daemon's note as a limit-wait line.
func TestContainerCardCarriesTheLimitWait(t *testing.T) {
	text := "waiting for anthropic limit until 03:12:40"
	v := api.SwarmView{RepoPath: "/repo", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{
		{ContainerName: "aimi-a", Status: state.StatusRunning}, {ContainerName: "aimi-b", Status: state.StatusRunning}}},
		Containers: []api.ContainerDetail{{Name: "aimi-a", LimitWaits: []api.LimitWait{{Provider: "anthropic", Reason: "limit", Text: text + "\u202e"}}}}}
	s := boardSwarm(v)
	if got := s.Containers[0].LimitWaits; len(got) != 1 || !strings.HasPrefix(got[0], text) || strings.ContainsRune(got[0], '\u202e') {
		t.Fatalf("card of the waiting container: %q", got)
	}
	if got := s.Containers[1].LimitWaits; got == nil || len(got) != 0 {
		t.Fatalf("card of the other container: %#v, want an empty list", got)
	}
	rec := state.Record{Stream: state.StreamDaemon, Reason: string(api.EventLimitWait)}
	rec.SetRaw([]byte(text))
	if l := summarize(rec); l.Kind != "limit-wait" || l.Text != text {
		t.Fatalf("journal line %+v", l)
	}
}

// A container the git service refused requests carries the count to its
// card; the journal shows each refusal as a git-refused line, cleaned.
func TestContainerCardCarriesTheGitRefusals(t *testing.T) {
	v := api.SwarmView{RepoPath: "/repo", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{
		{ContainerName: "aimi-a", Status: state.StatusRunning}}},
		Containers: []api.ContainerDetail{{Name: "aimi-a", GitRefused: 3}}}
	if got := boardSwarm(v).Containers[0].GitRefused; got != 3 {
		t.Fatalf("card's gitRefused %d, want 3", got)
	}
	text := "a push to refs/heads/main was refused: this container may push only refs/heads/feat/a"
	rec := state.Record{Stream: state.StreamDaemon, Type: state.TypeGitRefused, Reason: text + "\u202e"}
	if l := summarize(rec); l.Kind != "git-refused" || !strings.HasPrefix(l.Text, text) || strings.ContainsRune(l.Text, '\u202e') {
		t.Fatalf("journal line %+v", l)
	}
}

// Both cards of a conflicting pair carry a badge naming the other; a
// branch that would conflict with the landing target names it; overlaps
// get none.
func TestContainerCardsCarryTheConflictBadge(t *testing.T) {
	v := api.SwarmView{RepoPath: "/repo", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{
		{ContainerName: "aimi-a"}, {ContainerName: "aimi-b"}, {ContainerName: "aimi-c"}}},
		Conflicts: []api.Conflict{
			{Containers: []string{"aimi-a", "aimi-b"}, Files: []string{"f.go\u202e"}, Kind: "conflict"},
			{Containers: []string{"aimi-c"}, Onto: "main", Files: []string{"g.go"}, Kind: "conflict"},
			{Containers: []string{"aimi-a", "aimi-c"}, Files: []string{"h.go"}, Kind: "overlap"},
		}}
	s := boardSwarm(v)
	want := map[string]string{"aimi-a": "aimi-b", "aimi-b": "aimi-a", "aimi-c": "main (the landing target)"}
	for _, c := range s.Containers {
		if len(c.Conflicts) != 1 || c.Conflicts[0].With != want[c.Name] {
			t.Errorf("card %s: %+v, want one badge naming %s", c.Name, c.Conflicts, want[c.Name])
			continue
		}
		if strings.ContainsRune(c.Conflicts[0].Files[0], '\u202e') {
			t.Errorf("card %s: a bidi control reached the page: %q", c.Name, c.Conflicts[0].Files)
		}
	}
}

// A container a person granted a host through the inbox shows it on its
// card, with the grant's scope.
func TestContainerCardCarriesTheEgressGrants(t *testing.T) {
	v := api.SwarmView{RepoPath: "/repo", State: &state.Swarm{SwarmID: "s", Containers: []*state.Container{
		{ContainerName: "aimi-a", Status: state.StatusRunning}, {ContainerName: "aimi-b", Status: state.StatusRunning}}},
		Containers: []api.ContainerDetail{{Name: "aimi-a", Egress: &api.EgressRules{Granted: []api.EgressGrant{{Rule: "pkg.corp.test:8080", Scope: "swarm\u202e"}}}}}}
	s := boardSwarm(v)
	if got := s.Containers[0].EgressGranted; len(got) != 1 || got[0] != "pkg.corp.test:8080 (swarm)" {
		t.Fatalf("card of the granted container: %q", got)
	}
	if got := s.Containers[1].EgressGranted; got == nil || len(got) != 0 {
		t.Fatalf("card of the other container: %#v, want an empty list", got)
	}
}

// The train carries each branch's container's cost and its checks' and
// fix-ups', and the land's own, as the daemon gives them; text is cleaned.
func TestLandPanelCarriesTheCosts(t *testing.T) {
	l := boardLand(&api.LandReport{Branch: "aimi/land/x", Onto: "main\u202e", Cost: 0.25, Cut: true, Results: []api.LandResult{
		{Container: "aimi-a", Outcome: "landed", Cost: 1.5},
		{Container: "aimi-b", Outcome: "fixed", Cost: 2, RunsCost: 0.25},
	}})
	if l.Cost != 0.25 || !l.Cut || len(l.Results) != 2 || l.Results[0].Cost != 1.5 || l.Results[0].RunsCost != 0 || l.Results[1].Cost != 2 || l.Results[1].RunsCost != 0.25 {
		t.Fatalf("land %+v", l)
	}
	if strings.ContainsRune(l.Onto, '\u202e') {
		t.Errorf("a bidi control reached the page: %q", l.Onto)
	}
}
