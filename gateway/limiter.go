package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/usage"
)

// ErrLimitWait is why a call that waited at the gateway was not forwarded:
// the provider's limit or its max_concurrent did not let it through in
// time, or the wait queue was full.
var ErrLimitWait = errors.New("model gateway: the provider is limited")

// limiter holds calls before they go upstream: while a provider and
// account (a key variable) is limited (a 429 or 529 with its reset), the
// other calls to it wait until the reset instead of hitting the limit
// again; and at most Provider.MaxConcurrent calls of a provider are in
// flight across the daemon. Waiting calls are let through round-robin
// between containers, first come first served within one container.
type limiter struct {
	maxWait  time.Duration // the longest a call waits
	maxQueue int           // calls waiting per gate
	mu       sync.Mutex
	gates    map[gateKey]*gate
	inflight map[string]int // provider -> calls forwarded and not over
	now      func() time.Time
}

type gateKey struct{ provider, account string }

// gate is one provider and account: its limit and its waiting calls.
type gate struct {
	key     gateKey
	max     int // the provider's max_concurrent (0: no bound)
	until   time.Time
	attempt int // limited answers in a row
	timer   *time.Timer
	queues  map[string][]*waiter // container -> its waiting calls
	order   []string             // containers with waiting calls, next first
	queued  int
}

type waiter struct {
	ready   chan struct{}
	granted bool
}

func newLimiter(maxWait time.Duration, maxQueue int) *limiter {
	return &limiter{maxWait: maxWait, maxQueue: maxQueue, gates: map[gateKey]*gate{}, inflight: map[string]int{}, now: time.Now}
}

// acquire waits until a call of container to provider and account may go
// upstream. done must be called with the answer's status and header once
// the call is over. A wait past the limiter's bound, a full queue, a
// reset further than the bound, or ctx ending is an error wrapping
// ErrLimitWait (or ctx's error) that says until when the limit holds.
func (l *limiter) acquire(ctx context.Context, provider, account, container string, maxConcurrent int) (done func(status int, h http.Header), err error) {
	l.mu.Lock()
	g := l.gate(gateKey{provider, account}, maxConcurrent)
	now := l.now()
	if g.queued == 0 && l.open(g, now) {
		l.inflight[provider]++
		l.mu.Unlock()
		return l.doneFunc(g), nil
	}
	if g.until.Sub(now) > l.maxWait {
		until := g.until
		l.mu.Unlock()
		return nil, &WaitError{Provider: provider, Until: until, Why: "its limit resets later than the gateway waits"}
	}
	if g.queued >= l.maxQueue {
		l.mu.Unlock()
		return nil, &WaitError{Provider: provider, Until: g.until, Why: fmt.Sprintf("%d calls already wait for it", l.maxQueue)}
	}
	w := &waiter{ready: make(chan struct{})}
	if len(g.queues[container]) == 0 {
		g.order = append(g.order, container)
	}
	g.queues[container] = append(g.queues[container], w)
	g.queued++
	l.dispatch(g)
	l.mu.Unlock()
	t := time.NewTimer(l.maxWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return l.doneFunc(g), nil
	case <-t.C:
		err = &WaitError{Provider: provider, Why: fmt.Sprintf("it did not let the call through within %s", l.maxWait)}
	case <-ctx.Done():
		err = &WaitError{Provider: provider, Why: "the call was cancelled while it waited", Err: ctx.Err()}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted { // let through as the wait ended: give the place on
		l.inflight[provider]--
		l.dispatch(g)
	} else {
		l.remove(g, container, w)
	}
	err.(*WaitError).Until = g.until
	return nil, err
}

func (l *limiter) gate(k gateKey, max int) *gate {
	g := l.gates[k]
	if g == nil {
		g = &gate{key: k, queues: map[string][]*waiter{}}
		l.gates[k] = g
	}
	g.max = max
	return g
}

// open says whether a call of g may go upstream now.
func (l *limiter) open(g *gate, now time.Time) bool {
	return !now.Before(g.until) && (g.max <= 0 || l.inflight[g.key.provider] < g.max)
}

// dispatch lets waiting calls through while g is open, round-robin
// between containers, and arms a timer for the reset when it is not.
// Gates of one provider share its max_concurrent: a call over frees a
// place for any of them. l.mu is held.
func (l *limiter) dispatch(g *gate) {
	now := l.now()
	for g.queued > 0 && l.open(g, now) {
		c := g.order[0]
		q := g.queues[c]
		w := q[0]
		g.queued--
		g.order = g.order[1:]
		if len(q) > 1 { // the container goes to the back
			g.queues[c] = q[1:]
			g.order = append(g.order, c)
		} else {
			delete(g.queues, c)
		}
		w.granted = true
		l.inflight[g.key.provider]++
		close(w.ready)
	}
	if g.queued > 0 && now.Before(g.until) && g.timer == nil {
		g.timer = time.AfterFunc(g.until.Sub(now), func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			g.timer = nil
			l.dispatch(g)
		})
	}
}

// remove takes w out of container c's queue (and c out of the order when
// its queue is empty).
func (l *limiter) remove(g *gate, c string, w *waiter) {
	q := g.queues[c]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			g.queued--
			break
		}
	}
	if len(q) > 0 {
		g.queues[c] = q
		return
	}
	delete(g.queues, c)
	for i, x := range g.order {
		if x == c {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
}

// doneFunc ends a call of g: a limited answer closes g until its reset; a
// place of the provider is free for any of its gates.
func (l *limiter) doneFunc(g *gate) func(int, http.Header) {
	var once sync.Once
	return func(status int, h http.Header) {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			now := l.now()
			switch {
			case usage.Limited(status):
				until, _ := usage.LimitReset(h, now, g.attempt, 0)
				g.attempt++
				if until.After(g.until) {
					g.until = until
				}
			case status > 0 && status < 400:
				g.attempt = 0
			}
			l.inflight[g.key.provider]--
			for _, o := range l.gates {
				if o.key.provider == g.key.provider {
					l.dispatch(o)
				}
			}
		})
	}
}

// WaitError says why a call waited at the gateway and was not forwarded.
type WaitError struct {
	Provider string
	Until    time.Time // zero when the provider is not limited
	Why      string
	Err      error // the context's error when the call was cancelled
}

func (e *WaitError) Error() string {
	s := "model gateway: the call to " + e.Provider + " was not forwarded: " + e.Why
	if !e.Until.IsZero() {
		s += "; waiting for " + e.Provider + " limit until " + e.Until.Format("15:04:05")
	}
	return s
}

func (e *WaitError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLimitWait, e.Err}
	}
	return []error{ErrLimitWait}
}
