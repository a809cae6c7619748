package main

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/usage"
)

func TestUsageObserverJournalsUsageAndLimits(t *testing.T) {
	parallel(t)
	o := newUsageObserver(usage.DefaultPrices(), usage.DefaultLimitMaxWait, slog.New(slog.DiscardHandler))
	got := make(chan usage.Call, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.attach(ctx, func(_ context.Context, swarm, container string, _ time.Time, c usage.Call) error {
		if swarm != "s1" || container != "c1" {
			t.Errorf("journaled for %s/%s", swarm, container)
		}
		got <- c
		return nil
	})
	call := func(status int, h http.Header, body string) usage.Call {
		c := &gateway.Call{Swarm: "s1", Container: "c1", Provider: "anthropic", Status: status, Header: h, Started: time.Now()}
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
	ok := call(200, http.Header{"Content-Type": {"application/json"}}, `{"usage":{"input_tokens":1000000,"output_tokens":0}}`)
	if ok.Usage.Input != 1000000 || ok.Cost != 3 || ok.LimitedUntil != nil {
		t.Fatalf("a 200: %+v", ok)
	}
	lim := call(429, http.Header{"Retry-After": {"30"}, "Content-Type": {"application/json"}}, `{"type":"error"}`)
	if lim.LimitedUntil == nil || lim.LimitSource != "retry-after" || time.Until(*lim.LimitedUntil) > 31*time.Second || time.Until(*lim.LimitedUntil) < 20*time.Second {
		t.Fatalf("a 429: %+v", lim)
	}
	if c := o.Begin(&gateway.Call{Refused: "too many requests at once", Status: 429}); c != nil {
		t.Error("a call the gateway answered itself is metered")
	}
}
