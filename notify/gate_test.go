package notify

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/redact"
)

func requestEvent(swarm, ctr string, i int, title string) api.Event {
	id := fmt.Sprintf("r%04d", i)
	return api.Event{Time: time.Now(), Kind: api.EventPermissionRequested, RepoPath: "/home/u/repo", SwarmID: swarm, ContainerName: ctr,
		StoryID: "US-001", RequestID: id, Request: &api.PermissionRequest{ID: id, Title: title, Kind: "execute"}}
}

// TestRequestNoticesAreBoundedAndCoalesced: a flood of requests from one
// container (and another container of the swarm) gives the bound's
// notices one by one and then one notice per window telling how many more
// wait, from which containers.
func TestRequestNoticesAreBoundedAndCoalesced(t *testing.T) {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.handler))
	defer srv.Close()
	_, ch := runNotifier(t, Config{Webhooks: []string{srv.URL}, RequestWindow: 300 * time.Millisecond, RequestsPerContainer: 2, RequestsPerSwarm: 3})
	for i := range 40 {
		ch <- requestEvent("sw1", "aimi-x", i, "flood")
	}
	ch <- requestEvent("sw1", "aimi-y", 99, "quiet")
	ch <- requestEvent("sw1", "aimi-y", 100, "quiet")
	got := r.wait(t, 4)
	var more Notice
	if err := json.Unmarshal([]byte(got[3]), &more); err != nil {
		t.Fatal(err)
	}
	// aimi-x: 2 one by one, 38 held; aimi-y: the swarm's third, then held.
	if more.Kind != KindRequestWaiting || more.More != 39 || !strings.Contains(more.Text, "39 more permission requests wait (38 from aimi-x, 1 from aimi-y)") {
		t.Errorf("coalesced notice: %+v", more)
	}
}

// TestNoticesAreRedacted: a secret in a request's title, whatever its
// case, reaches neither a webhook nor the command; the marker does.
func TestNoticesAreRedacted(t *testing.T) {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.handler))
	defer srv.Close()
	_, ch := runNotifier(t, Config{Webhooks: []string{srv.URL}, Redact: redact.New(map[string]string{"GH_TOKEN": "ghp_secret1234"})})
	ch <- requestEvent("sw1", "aimi-x", 1, "push with GHP_SECRET1234 please")
	b := r.wait(t, 1)[0]
	if strings.Contains(strings.ToLower(b), "secret1234") || !strings.Contains(b, "[secret:GH_TOKEN]") {
		t.Errorf("notice: %s", b)
	}
}

// TestGateHoldsPastItsBoundsUntilTheWindowEnds: the gate lets the bounds
// through, per container and per swarm, holds the rest, tells them in one
// notice per swarm and then starts afresh.
func TestGateHoldsPastItsBoundsUntilTheWindowEnds(t *testing.T) {
	g := newGate(2, 3)
	admitted := 0
	for i := range 40 {
		if g.admit(Notice{Kind: KindRequestWaiting, SwarmID: "sw1", Container: "aimi-x", Repo: "/r", RequestID: fmt.Sprint(i)}) {
			admitted++
		}
	}
	for _, sw := range []string{"sw1", "sw2"} {
		if g.admit(Notice{Kind: KindRequestWaiting, SwarmID: sw, Container: "aimi-y", Repo: "/r"}) {
			admitted++
		}
	}
	if !g.admit(Notice{Kind: KindContainerFinished, SwarmID: "sw1", Container: "aimi-x"}) {
		t.Error("a container's end was held")
	}
	if admitted != 4 {
		t.Errorf("%d admitted, want 2 of aimi-x, 1 of aimi-y in sw1 and 1 in sw2", admitted)
	}
	out := g.flush()
	if len(out) != 1 || out[0].SwarmID != "sw1" || out[0].More != 38 || out[0].Container != "aimi-x" {
		t.Errorf("flush: %+v", out)
	}
	if out := g.flush(); len(out) != 0 {
		t.Errorf("second flush: %+v", out)
	}
	if !g.admit(Notice{Kind: KindRequestWaiting, SwarmID: "sw1", Container: "aimi-x"}) {
		t.Error("a new window held the first request")
	}
}

// TestCommandEnvLeavesOutSecrets: a variable whose value holds a known
// secret is not passed on to notify.command; the others are.
func TestCommandEnvLeavesOutSecrets(t *testing.T) {
	r := redact.New(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-0123456789"})
	got := commandEnv([]string{"PATH=/usr/bin", "MY_KEY=sk-ant-0123456789", "HOME=/home/u", "EMPTY="}, r)
	if strings.Join(got, " ") != "PATH=/usr/bin HOME=/home/u EMPTY=" {
		t.Errorf("env: %q", got)
	}
}
