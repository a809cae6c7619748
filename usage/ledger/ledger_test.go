package ledger

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/usage"
)

// TestLedgerJournalsUsageAndLimits: a call is journaled with its tokens
// and cost; a limited one with the reset the gateway decided for it (a
// backoff here: the answer names no reset), never one of its own.
func TestLedgerJournalsUsageAndLimits(t *testing.T) {
	t.Parallel()
	o := New(usage.DefaultPrices(), slog.New(slog.DiscardHandler))
	got := make(chan usage.Call, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Attach(ctx, func(_ context.Context, sb contract.Sandbox, _ time.Time, c usage.Call) error {
		if sb != (contract.Sandbox{Swarm: "s1", Container: "c1"}) {
			t.Errorf("journaled for %+v", sb)
		}
		got <- c
		return nil
	}, nil)
	call := func(status int, h http.Header, lim *gateway.Limit, body string) usage.Call {
		c := &gateway.Call{Swarm: "s1", Container: "c1", Provider: "anthropic", Status: status, Header: h, Started: time.Now(), Limit: lim}
		tap := o.Begin(c)
		tap.Body([]byte(body))
		tap.End(c)
		select {
		case r := <-got:
			return r
		case <-time.After(time.Minute):
			t.Fatal("nothing journaled")
		}
		return usage.Call{}
	}
	ok := call(200, http.Header{"Content-Type": {"application/json"}}, nil, `{"usage":{"input_tokens":1000000,"output_tokens":0}}`)
	if ok.Usage.Input != 1000000 || ok.Cost != 3 || ok.LimitedUntil != nil {
		t.Fatalf("a 200: %+v", ok)
	}
	decided := gateway.Limit{Until: time.Now().Add(1234 * time.Millisecond), Source: "backoff"}
	lim := call(429, http.Header{"Content-Type": {"application/json"}}, &decided, `{"type":"error"}`)
	if lim.LimitedUntil == nil || lim.LimitSource != "backoff" || !lim.LimitedUntil.Equal(decided.Until) {
		t.Fatalf("a 429: %+v, want the gateway's decision %+v", lim, decided)
	}
	if c := o.Begin(&gateway.Call{Refused: "too many requests at once", Status: 429}); c != nil {
		t.Error("a call the gateway answered itself is metered")
	}
}

// The gateway's wait notes reach the journal through the same queue as
// the calls, in order, with the note's time and text.
func TestLedgerPassesLimitWaitsOn(t *testing.T) {
	t.Parallel()
	o := New(usage.DefaultPrices(), slog.New(slog.DiscardHandler))
	type note struct {
		name string
		at   time.Time
		over bool
		text string
	}
	got := make(chan note, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Attach(ctx, func(context.Context, contract.Sandbox, time.Time, usage.Call) error { return nil },
		func(_ context.Context, sb contract.Sandbox, at time.Time, over bool, text string) {
			got <- note{sb.Container, at, over, text}
		})
	since, until := time.Now(), time.Now().Add(time.Minute)
	w := gateway.Wait{Swarm: "s1", Container: "c1", Provider: "anthropic", Reason: gateway.WaitLimit, Until: until, Since: since, Calls: 1}
	var _ gateway.WaitObserver = o
	o.Waited(gateway.WaitNote{Wait: w})
	o.Waited(gateway.WaitNote{Wait: w, Ended: until})
	for i, want := range []note{
		{"c1", since, false, "waiting for anthropic limit until " + until.Local().Format(time.TimeOnly)},
		{"c1", until, true, "the wait for anthropic is over after 1m0s; the calls go on"},
	} {
		select {
		case n := <-got:
			if n.name != want.name || !n.at.Equal(want.at) || n.over != want.over || n.text != want.text {
				t.Errorf("note %d: %+v, want %+v", i, n, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("note %d not passed on", i)
		}
	}
}
