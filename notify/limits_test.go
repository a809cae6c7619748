package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/gateway"
)

type waitsHeard struct {
	notes []gateway.WaitNote
	begun []*gateway.Call
}

func (w *waitsHeard) Begin(c *gateway.Call) gateway.Tap { w.begun = append(w.begun, c); return nil }
func (w *waitsHeard) Waited(n gateway.WaitNote)         { w.notes = append(w.notes, n) }

// TestLimitWaitReachesTheWebhooks: a limited answer and the gateway's
// wait notes (which still reach the usage observer) become one
// limit-wait-started notice per limit and swarm, naming the swarm's
// repository, its containers limited or held together and the reset, at
// the time the limit was first seen; a wait for a place, an end, answers
// and notes within the limit told, and those heard before the notifier
// exists are no notice; after the reset a new limit is told again.
func TestLimitWaitReachesTheWebhooks(t *testing.T) {
	t.Parallel()
	hook := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(hook.handler))
	defer srv.Close()
	l := NewLimitNotices(slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.batch = 200 * time.Millisecond
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	inner := &waitsHeard{}
	tee := l.Tee(inner).(interface {
		gateway.Observer
		gateway.WaitObserver
	})
	until := now.Add(30 * time.Second)
	note := func(ctr, reason string, until time.Time, ended bool) gateway.WaitNote {
		w := gateway.WaitNote{Wait: gateway.Wait{Swarm: "sw1", Container: ctr, Provider: "anthropic", Reason: reason, Until: until, Since: now.Add(-2 * time.Second)}}
		if ended {
			w.Ended = now
		}
		return w
	}
	// limited is a 429 whose reset the gateway decided retryAfter from now.
	limited := func(ctr string, retryAfter time.Duration) *gateway.Call {
		swarm := "sw1"
		if ctr == "aimi-z" {
			swarm = "sw2"
		}
		return &gateway.Call{Swarm: swarm, Container: ctr, Provider: "anthropic", Status: http.StatusTooManyRequests,
			Limit: &gateway.Limit{Until: l.now().Add(retryAfter), Source: "retry-after"}}
	}
	tee.Waited(note("aimi-early", gateway.WaitLimit, until, false))
	n, err := New(Config{Webhooks: []string{srv.URL + "/hooks/T0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, make(chan api.Event)) }()
	defer func() { cancel(); <-done }()
	repos := map[string]string{"sw1": "/home/u/repo1", "sw2": "/home/u/repo2"}
	l.Set(n, func(swarm string) string { return repos[swarm] })
	tee.Begin(&gateway.Call{Swarm: "sw1", Container: "aimi-ok", Provider: "anthropic", Status: 200})
	tee.Begin(limited("aimi-b", 30*time.Second))
	tee.Begin(limited("aimi-z", 30*time.Second))
	for _, w := range []gateway.WaitNote{note("aimi-a", gateway.WaitLimit, until, false),
		note("aimi-c", gateway.WaitConcurrency, time.Time{}, false), note("aimi-b", gateway.WaitLimit, until, true)} {
		tee.Waited(w)
	}
	if len(inner.notes) != 4 || len(inner.begun) != 3 {
		t.Errorf("the usage observer heard %d notes and %d calls, want 4 and 3", len(inner.notes), len(inner.begun))
	}
	first := waitNotices(t, hook, 2)
	for i, want := range []struct{ swarm, repo, ctrs string }{{"sw1", "/home/u/repo1", "aimi-a,aimi-b"}, {"sw2", "/home/u/repo2", "aimi-z"}} {
		no := first[i]
		if no.Provider != "anthropic" || !no.Until.Equal(until) || no.SwarmID != want.swarm || no.Repo != want.repo ||
			strings.Join(no.Containers, ",") != want.ctrs || !no.Time.Equal(now.Add(-2*time.Second)) || !strings.HasPrefix(no.Text, filepath.Base(want.repo)+": ") {
			t.Errorf("notice %+v: want anthropic, the reset %v, %s of %s, %s, first seen at %v", no, until, want.swarm, want.repo, want.ctrs, now.Add(-2*time.Second))
		}
	}
	tee.Waited(note("aimi-d", gateway.WaitLimit, until.Add(time.Second), false)) // within the limit told
	tee.Begin(limited("aimi-d", 31*time.Second))
	mu.Lock()
	now = until.Add(time.Second) // past the reset: a new limit
	mu.Unlock()
	tee.Begin(limited("aimi-e", 60*time.Second))
	h := waitNotices(t, hook, 3)
	if len(h) != 3 {
		t.Fatalf("notices %+v: want a third one for the new limit only", h)
	}
	if !h[2].Until.Equal(until.Add(61*time.Second)) || strings.Join(h[2].Containers, ",") != "aimi-e" || !h[2].Time.Equal(until.Add(time.Second)) {
		t.Errorf("the third notice %+v: want aimi-e until %v", h[2], until.Add(61*time.Second))
	}
}

// waitNotices waits (a minute at most) for n notices, in their order.
func waitNotices(t *testing.T, hook *receiver, n int) []Notice {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h := decodeNotices(t, hook.all())
		if len(h) >= n {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("notices %+v: want %d", h, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decodeNotices(t *testing.T, bodies []string) []Notice {
	t.Helper()
	var out []Notice
	for _, b := range bodies {
		var no Notice
		if err := json.Unmarshal([]byte(b), &no); err != nil {
			t.Fatalf("notice %q: %v", b, err)
		}
		out = append(out, no)
	}
	return out
}

func (r *receiver) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}
