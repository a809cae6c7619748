package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/notify"
)

type waitsHeard struct {
	notes []gateway.WaitNote
	begun []*gateway.Call
}

func (w *waitsHeard) Begin(c *gateway.Call) gateway.Tap { w.begun = append(w.begun, c); return nil }
func (w *waitsHeard) Waited(n gateway.WaitNote)         { w.notes = append(w.notes, n) }

// TestLimitWaitReachesTheWebhooks: a limited answer and the gateway's
// wait notes (which still reach the usage observer) become one
// limit-wait-started notice per limit, naming the containers limited or
// held together and the reset; a wait for a place, an end, answers and
// notes within the limit told, and those heard before the notifier exists
// are no notice; after the reset a new limit is told again.
func TestLimitWaitReachesTheWebhooks(t *testing.T) {
	parallel(t)
	hook := newHookReceiver(t)
	l := newLimitNotices(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.batch = 200 * time.Millisecond
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	inner := &waitsHeard{}
	tee := waitTee{inner, l}
	until := now.Add(30 * time.Second)
	note := func(ctr, reason string, until time.Time, ended bool) gateway.WaitNote {
		w := gateway.WaitNote{Wait: gateway.Wait{Swarm: "sw1", Container: ctr, Provider: "anthropic", Reason: reason, Until: until, Since: now}}
		if ended {
			w.Ended = now
		}
		return w
	}
	limited := func(ctr, retryAfter string) *gateway.Call {
		return &gateway.Call{Swarm: "sw1", Container: ctr, Provider: "anthropic", Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {retryAfter}}}
	}
	tee.Waited(note("aimi-early", gateway.WaitLimit, until, false))
	n, err := notify.New(notify.Config{Webhooks: []string{hook.url + "/hooks/T0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, make(chan api.Event)) }()
	defer func() { cancel(); <-done }()
	l.set(n)
	tee.Begin(&gateway.Call{Swarm: "sw1", Container: "aimi-ok", Provider: "anthropic", Status: 200})
	tee.Begin(limited("aimi-b", "30"))
	for _, w := range []gateway.WaitNote{note("aimi-a", gateway.WaitLimit, until, false),
		note("aimi-c", gateway.WaitConcurrency, time.Time{}, false), note("aimi-b", gateway.WaitLimit, until, true)} {
		tee.Waited(w)
	}
	if len(inner.notes) != 4 || len(inner.begun) != 2 {
		t.Errorf("the usage observer heard %d notes and %d calls, want 4 and 2", len(inner.notes), len(inner.begun))
	}
	first := decodeNotices(t, hook.wait(t, []string{notify.KindLimitWait}))
	if len(first) != 1 || first[0].Provider != "anthropic" || !first[0].Until.Equal(until) || first[0].SwarmID != "sw1" || strings.Join(first[0].Containers, ",") != "aimi-a,aimi-b" {
		t.Fatalf("notices %+v: want one naming anthropic, the reset %v, sw1, aimi-a and aimi-b", first, until)
	}
	tee.Waited(note("aimi-d", gateway.WaitLimit, until.Add(time.Second), false)) // within the limit told
	tee.Begin(limited("aimi-d", "31"))
	mu.Lock()
	now = until.Add(time.Second) // past the reset: a new limit
	mu.Unlock()
	tee.Begin(limited("aimi-e", "60"))
	deadline := time.Now().Add(time.Minute)
	for {
		h := decodeNotices(t, hook.all())
		if len(h) == 2 {
			if !h[1].Until.Equal(until.Add(61*time.Second)) || strings.Join(h[1].Containers, ",") != "aimi-e" {
				t.Errorf("the second notice %+v: want aimi-e until %v", h[1], until.Add(61*time.Second))
			}
			break
		}
		if len(h) > 2 || time.Now().After(deadline) {
			t.Fatalf("notices %+v: want a second one for the new limit only", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decodeNotices(t *testing.T, bodies []string) []notify.Notice {
	t.Helper()
	var out []notify.Notice
	for _, b := range bodies {
		var no notify.Notice
		if err := json.Unmarshal([]byte(b), &no); err != nil {
			t.Fatalf("notice %q: %v", b, err)
		}
		out = append(out, no)
	}
	return out
}

func (h *hookReceiver) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}
