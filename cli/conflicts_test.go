package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

func TestStatusShowsConflictsUnderTheTable(t *testing.T) {
	v := api.SwarmView{Conflicts: []api.Conflict{
		{Containers: []string{"aimi-a", "aimi-b"}, Files: []string{"f.go", "g.go"}, Kind: "conflict"},
		{Containers: []string{"aimi-c"}, Onto: "main", Files: []string{"1", "2", "3", "4", "5", "6", "7"}, Kind: "conflict"},
		{Containers: []string{"aimi-a", "aimi-c"}, Files: []string{"h"}, Kind: "overlap"},
		{Containers: []string{"aimi-\x1b[2Jx", "y"}, Files: []string{"z\x07"}, Kind: "conflict"},
	}}
	var b bytes.Buffer
	printConflicts(&b, v)
	out := b.String()
	for _, want := range []string{"aimi-a and aimi-b  f.go, g.go", "aimi-c onto main  1, 2, 3, 4, 5 and 2 more", "Overlaps: 1 pair(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status says:\n%s\nwant a line with %q", out, want)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("control characters reached the terminal: %q", out)
	}
	b.Reset()
	printConflicts(&b, api.SwarmView{})
	if b.Len() != 0 {
		t.Errorf("no conflicts printed %q, want nothing", b.String())
	}
}

func TestStatusJSONCarriesTheConflicts(t *testing.T) {
	view := `{"repoPath":"/r","state":{"swarmId":"x","containers":[]},"containers":[],"conflicts":[{"containers":["a","b"],"files":["f"],"kind":"conflict"}]}`
	var b bytes.Buffer
	if err := printStatusJSON(&b, []byte(view), false); err != nil {
		t.Fatal(err)
	}
	var got struct {
		SwarmID   string         `json:"swarmId"`
		Conflicts []api.Conflict `json:"conflicts"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.SwarmID != "x" || len(got.Conflicts) != 1 || got.Conflicts[0].Kind != "conflict" {
		t.Errorf("status --json: %s (%v), want the state with the conflict", b.String(), err)
	}
	b.Reset()
	if err := printStatusJSON(&b, []byte(`{"state":{}}`), false); err != nil || strings.TrimSpace(b.String()) != "{}" {
		t.Errorf("status --json without conflicts: %q %v", b.String(), err)
	}
}

func TestStatusSumsTheLandUp(t *testing.T) {
	var b bytes.Buffer
	printLandLine(&b, &api.LandReport{Onto: "main", Branch: "aimi/land/x", Running: true, Results: []api.LandResult{
		{Outcome: "landed"}, {Outcome: "landed"}, {Outcome: api.LandFixing}, {Outcome: "held"}}})
	if got := b.String(); got != "Land (land running): onto main as aimi/land/x: 2 landed, 1 fixing, 1 held\n" {
		t.Errorf("land line %q", got)
	}
	b.Reset()
	printLandLine(&b, &api.LandReport{Onto: "main", Branch: "aimi/land/x", Cut: true, Results: []api.LandResult{{Outcome: "landed"}, {Outcome: api.LandVerifying}}})
	if got := b.String(); got != "Land (land cut short: 'aimi swarm land' goes on where it stopped): onto main as aimi/land/x: 1 landed, 1 verifying\n" {
		t.Errorf("cut land line %q", got)
	}
	b.Reset()
	printLandLine(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no land printed %q", b.String())
	}
	b.Reset()
	view := `{"state":{"swarmId":"x"},"land":{"branch":"aimi/land/x","results":[]}}`
	if err := printStatusJSON(&b, []byte(view), false); err != nil || !strings.Contains(b.String(), `"land": {`) {
		t.Errorf("status --json: %q %v, want the land member", b.String(), err)
	}
}

// TestLandOutputInRemoteMode: the land's report and the status line name
// the pull request, or the page that opens it.
func TestLandOutputInRemoteMode(t *testing.T) {
	var b bytes.Buffer
	rep := api.LandReport{Onto: "main", Branch: "aimi/land/x", Origin: "https://git.example/acme/w.git", PRURL: "https://git.example/acme/w/pull/7",
		Results: []api.LandResult{{Container: "a", Branch: "feat/a", Outcome: "landed", Merge: "abc"}}}
	printLand(&b, rep)
	if got := b.String(); !strings.Contains(got, "on origin as aimi/land/x; its pull request onto main:\n  https://git.example/acme/w/pull/7\n") {
		t.Errorf("land with a pull request:\n%s", got)
	}
	b.Reset()
	printLandLine(&b, &rep)
	if got := b.String(); got != "Land (last land): onto main as aimi/land/x: 1 landed; pull request https://git.example/acme/w/pull/7\n" {
		t.Errorf("land line %q", got)
	}
	b.Reset()
	rep.PRURL, rep.Take = "", "open its pull request: https://git.example/acme/w/compare/main...aimi/land/x?expand=1"
	printLand(&b, rep)
	if got := b.String(); !strings.Contains(got, "on origin as aimi/land/x; open its pull request: https://git.example/acme/w/compare/main...aimi/land/x?expand=1\n") {
		t.Errorf("land without a pull request:\n%s", got)
	}
}
