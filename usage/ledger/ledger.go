package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/usage"
)

// queueLen bounds the calls waiting to be journaled: the gateway's
// answers never wait for the journal; past the bound a call's account is
// dropped with a warning.
const queueLen = 4096

// Ledger is the model gateway's Observer that meters every answer's
// token usage as it streams and journals each call, with its cost, in its
// container's journal.
type Ledger struct {
	prices map[string]usage.Prices
	log    *slog.Logger
	// queue holds pointers: a channel's buffer is allocated whole when it
	// is made, and 4096 entries by value were 870 KB of the daemon's
	// memory for a queue that is almost always empty.
	queue chan *entry

	mu sync.Mutex
	// spent, once set (OnSpend, under mu), hears each call's cost
	// for the budgets (package budget).
	spent func(sb contract.Sandbox, at time.Time, cost float64)
}

type entry struct {
	swarm, container string
	at               time.Time
	call             usage.Call
	wait             *gateway.WaitNote // a limit wait's note instead of a call
}

// New makes a Ledger pricing calls at prices; Attach starts its journaling.
func New(prices map[string]usage.Prices, log *slog.Logger) *Ledger {
	return &Ledger{prices: prices, log: log, queue: make(chan *entry, queueLen)}
}

// OnSpend makes o tell f every call's cost from now on.
func (o *Ledger) OnSpend(f func(sb contract.Sandbox, at time.Time, cost float64)) {
	o.mu.Lock()
	o.spent = f
	o.mu.Unlock()
}

// Waited implements gateway.WaitObserver: the note is journaled and
// published in order with the calls.
func (o *Ledger) Waited(n gateway.WaitNote) {
	at := n.Since
	if !n.Ended.IsZero() {
		at = n.Ended
	}
	select {
	case o.queue <- &entry{swarm: n.Swarm, container: n.Container, at: at, wait: &n}:
	default:
		o.log.Warn("limit wait not journaled: too many calls waiting to be", "container", n.Container, "provider", n.Provider)
	}
}

// Begin implements gateway.Observer. A call the gateway answered itself
// reached no provider: nothing to count.
func (o *Ledger) Begin(c *gateway.Call) gateway.Tap {
	if c.Refused != "" {
		return nil
	}
	return &tap{o: o, m: usage.NewMeter(c.Header.Get("Content-Type"))}
}

type tap struct {
	o *Ledger
	m *usage.Meter
}

func (t *tap) Body(p []byte) { t.m.Write(p) }

func (t *tap) End(c *gateway.Call) {
	u := t.m.Usage()
	e := &entry{swarm: c.Swarm, container: c.Container, at: c.Started, call: usage.Call{Provider: c.Provider, Status: c.Status, Usage: u, Cost: t.o.prices[c.Provider].Cost(u)}}
	t.o.noteLimit(c, &e.call)
	t.o.mu.Lock()
	spent := t.o.spent
	t.o.mu.Unlock()
	if spent != nil {
		spent(contract.Sandbox{Swarm: c.Swarm, Container: c.Container}, c.Started, e.call.Cost)
	}
	select {
	case t.o.queue <- e:
	default:
		t.o.log.Warn("model call not journaled: too many waiting", "container", c.Container, "provider", c.Provider)
	}
}

// Attach journals the queued calls through journal, and the limit waits
// through wait, until ctx ends.
func (o *Ledger) Attach(ctx context.Context, journal func(ctx context.Context, sb contract.Sandbox, at time.Time, call usage.Call) error,
	wait func(ctx context.Context, sb contract.Sandbox, at time.Time, over bool, text string)) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-o.queue:
				if e.wait != nil {
					wait(ctx, contract.Sandbox{Swarm: e.swarm, Container: e.container}, e.at, !e.wait.Ended.IsZero(), e.wait.String())
					continue
				}
				if err := journal(ctx, contract.Sandbox{Swarm: e.swarm, Container: e.container}, e.at, e.call); err != nil {
					o.log.Debug("model call not journaled", "container", e.container, "err", err)
				}
			}
		}
	}()
}

// noteLimit records the gateway's limit on a limited answer: until when
// it holds the provider's calls, and from what (a header or "backoff").
func (o *Ledger) noteLimit(c *gateway.Call, call *usage.Call) {
	if c.Limit == nil {
		return
	}
	until := c.Limit.Until
	call.LimitedUntil, call.LimitSource = &until, c.Limit.Source
	o.log.Warn(fmt.Sprintf("waiting for %s limit until %s", c.Provider, until.Local().Format(time.TimeOnly)),
		"container", c.Container, "status", c.Status, "from", c.Limit.Source)
}
