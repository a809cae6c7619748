package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

func TestRequestKindReplacesIDsAndKeepsOperations(t *testing.T) {
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v1.41/containers/json", "GET containers/json"},
		{"GET", "/v1.41/containers/3f2a9c/json", "GET containers/{id}/json"},
		{"POST", "/v1.41/containers/create", "POST containers/create"},
		{"POST", "/v1.41/containers/aimi-alpha/start", "POST containers/{id}/start"},
		{"GET", "/v1.41/containers/aimi-alpha/logs", "GET containers/{id}/logs"},
		{"DELETE", "/v1.41/networks/aimi-net", "DELETE networks/{id}"},
		{"GET", "/v1.41/events", "GET events"},
		{"HEAD", "/_ping", "HEAD _ping"},
		{"GET", "/v1.41/images/registry.example/aimi/sandbox:1/json", "GET images/{id}/json"},
		{"GET", "/", "GET /"},
	} {
		if got := RequestKind(c.method, c.path); got != c.want {
			t.Errorf("RequestKind(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

func TestKindsAreBounded(t *testing.T) {
	s := newKindSet(2)
	if s.add("a") != "a" || s.add("b") != "b" || s.add("c") != "other" || s.add("a") != "a" {
		t.Fatal("a kind set admits more than its bound, or forgets what it admitted")
	}
}

type fakeSource struct {
	views []api.SwarmView
	err   error
}

func (f fakeSource) List(context.Context) []api.SwarmView { return f.views }
func (f fakeSource) Health(context.Context) error         { return f.err }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestHealthzSaysWhyTheDaemonIsNotHealthy(t *testing.T) {
	m := New()
	if code, body := get(t, m.Handler(), "/healthz"); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("before Attach: %d %q", code, body)
	}
	m2 := New()
	m2.Attach(fakeSource{err: errors.New("state saves failing")})
	if code, body := get(t, m2.Handler(), "/healthz"); code != 503 || !strings.Contains(body, "state saves failing") {
		t.Errorf("failing source: %d %q", code, body)
	}
	m3 := New()
	m3.Attach(fakeSource{})
	if code, body := get(t, m3.Handler(), "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthy: %d %q", code, body)
	}
}

func TestUntrustedLabelValuesStayBounded(t *testing.T) {
	m := New()
	m.Attach(fakeSource{views: []api.SwarmView{{Containers: []api.ContainerDetail{
		{Status: "running", Stories: []api.StoryDetail{{Status: "in_progress"}, {Status: "\x1b[2Jhostile"}}},
		{Status: "made-up"},
	}}}})
	m.Event(api.Event{Kind: api.EventProgress, MessageType: "progress-update"})
	m.Event(api.Event{Kind: api.EventLineRejected, MessageType: "\x1b]0;title\x07"})
	m.Event(api.Event{Kind: api.EventLineRejected})
	_, body := get(t, m.Handler(), "/metrics")
	for _, want := range []string{
		`aimid_containers{status="running"} 1`, `aimid_containers{status="other"} 1`,
		`aimid_stories{status="in_progress"} 1`, `aimid_stories{status="other"} 1`,
		`aimid_messages_total{result="journaled",type="progress-update"} 1`,
		`aimid_messages_total{result="rejected",type="other"} 1`,
		`aimid_messages_total{result="invalid",type=""} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	if strings.Contains(body, "\x1b") || strings.Contains(body, "hostile") {
		t.Error("a container's text reached a label")
	}
}

func TestLimitWaitsAreCountedAndGauged(t *testing.T) {
	m := New()
	for _, k := range []api.EventKind{api.EventLimitWait, api.EventLimitWait, api.EventLimitWaitOver} {
		m.Event(api.Event{Kind: k, ContainerName: "aimi-a"})
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			switch {
			case mt.GetCounter() != nil:
				got[f.GetName()] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[f.GetName()] = mt.GetGauge().GetValue()
			}
		}
	}
	if got["aimid_model_limit_waits_total"] != 2 || got["aimid_model_limit_waiting"] != 1 {
		t.Errorf("waits %v, waiting %v; want 2 and 1", got["aimid_model_limit_waits_total"], got["aimid_model_limit_waiting"])
	}
}

func TestProfilesOnlyWhenAskedFor(t *testing.T) {
	m := New()
	if code, _ := get(t, m.handler(false), "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("profiles off: /debug/pprof/heap answered %d, want 404", code)
	}
	if code, body := get(t, m.handler(true), "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("profiles on: /debug/pprof/heap answered %d %.80q", code, body)
	}
}
