package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

func TestPrintEgressShowsEachSourceAndTheGrants(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	printEgress(&b, []egressEntry{
		{Name: "aimi-a", Status: "running", Rules: &api.EgressRules{Config: []string{"registry.npmjs.org"}, Repository: []string{}, Ask: true,
			Granted: []api.EgressGrant{{Rule: "pkg.corp.test:8080", Scope: "swarm", By: "person", Who: "alice, uid 1000", At: at}, {Rule: "x.test:443", Scope: "once", StoryIDs: []string{"US-002"}, By: "person", At: at}}}},
		{Name: "aimi-b\x1b[31m", Status: "completed"},
	})
	out := b.String()
	for _, want := range []string{"aimi-a (running)", "config:      registry.npmjs.org", "repository:  -", "pkg.corp.test:8080  swarm  by a person (alice, uid 1000)",
		"x.test:443  once (story US-002)", "otherwise:   asked in the inbox", "no rules in force"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
}

func TestInboxShowsTheContainersOfAFetchRequest(t *testing.T) {
	var b bytes.Buffer
	now := time.Now()
	in := api.Inbox{Requests: []api.PermissionRequest{{ID: "abc", ContainerName: "aimi-a", Containers: []string{"aimi-a", "aimi-b", "aimi-c"},
		Kind: "fetch", Title: "Reach pkg.corp.test:8080", Command: "GET /simple/", AskedAt: now, Deadline: now,
		Options: []api.PermissionOption{{ID: "swarm", Kind: "allow_always", Name: "all"}}}}}
	if err := WriteInbox(&b, in, false, now); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "3 containers") || !strings.Contains(out, "containers: aimi-a, aimi-b, aimi-c") {
		t.Errorf("inbox:\n%s", out)
	}
}
