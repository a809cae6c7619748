package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/usage"
)

// ErrLimitWait is why a call that waited at the gateway was not forwarded:
// the provider's limit or its max_concurrent did not let it through in
// time, or the wait queue was full.
var ErrLimitWait = errors.New("model gateway: the provider is limited")

// limiter holds calls before they go upstream: while a provider and
// account (a key variable) is limited (a 429 or 529 with its reset), the
// other calls to it wait until the reset instead of hitting the limit
// again; at most Provider.MaxConcurrent calls of a provider are in flight
// across the daemon, and at most Provider.RequestsPerMinute begin in any
// minute. Waiting calls are let through round-robin between containers,
// first come first served within one container. Who waits, and since
// when, is kept for Waits and told to onWait (limitwait.go); the resets
// are kept in a file across restarts (limitstore.go).
type limiter struct {
	maxWait  time.Duration // the longest a call waits
	maxQueue int           // calls waiting per gate
	// maxReset bounds the reset a limited answer asks for (its headers or
	// the backoff): agent.limit_max_wait.
	maxReset time.Duration
	mu       sync.Mutex
	gates    map[gateKey]*gate
	inflight map[string]int         // provider -> calls forwarded and not over
	begun    map[string][]time.Time // provider -> calls let through in the last minute (requests_per_minute)
	now      func() time.Time

	waits   map[waitKey]*waiting
	notes   []WaitNote // told to onWait by flush, in order
	onWait  func(WaitNote)
	emitMu  sync.Mutex // flush's order
	store   string     // the file of the resets ("": not kept)
	dirty   bool       // a reset changed since the last save
	storeMu sync.Mutex
	log     *slog.Logger
}

type gateKey struct{ provider, account string }

// who is the container a call comes from.
type who = contract.Sandbox

// caller is one call to acquire a place for: whose, to which provider and
// account, and the provider's bounds.
type caller struct {
	provider, account string
	who
	maxConcurrent, perMinute int
}

// gate is one provider and account: its limit and its waiting calls.
type gate struct {
	key     gateKey
	max     int // the provider's max_concurrent (0: no bound)
	rpm     int // the provider's requests_per_minute (0: no bound)
	until   time.Time
	attempt int // limited answers in a row
	timer   *time.Timer
	timerAt time.Time
	queues  map[who][]*waiter // container -> its waiting calls
	order   []who             // containers with waiting calls, next first
	queued  int
}

type waiter struct {
	ready   chan struct{}
	granted bool
}

func newLimiter(maxWait time.Duration, maxQueue int) *limiter {
	return &limiter{maxWait: maxWait, maxQueue: maxQueue, maxReset: usage.DefaultLimitMaxWait,
		gates: map[gateKey]*gate{}, inflight: map[string]int{}, begun: map[string][]time.Time{},
		waits: map[waitKey]*waiting{}, now: time.Now, log: slog.Default()}
}

// acquire waits until a call of c may go upstream. The pass's done must
// be called with the answer's status and header once the call is over
// (and its decide as the answer's headers arrive). A wait past
// the limiter's bound, a full queue, a reset further than the bound, or
// ctx ending is an error wrapping ErrLimitWait (or ctx's error) that says
// until when the limit holds.
func (l *limiter) acquire(ctx context.Context, c caller) (_ *pass, err error) {
	defer l.flush()
	l.mu.Lock()
	g := l.gate(gateKey{c.provider, c.account}, c.maxConcurrent, c.perMinute)
	now := l.now()
	if g.queued == 0 && l.open(g, now) {
		l.admit(g, now)
		l.mu.Unlock()
		return &pass{l: l, g: g}, nil
	}
	if g.until.Sub(now) > l.maxWait {
		until := g.until
		l.mu.Unlock()
		return nil, &WaitError{Provider: c.provider, Until: until, Why: "its limit resets later than the gateway waits"}
	}
	if g.queued >= l.maxQueue {
		l.mu.Unlock()
		return nil, &WaitError{Provider: c.provider, Until: g.until, Why: fmt.Sprintf("%d calls already wait for it", l.maxQueue)}
	}
	w := &waiter{ready: make(chan struct{})}
	if len(g.queues[c.who]) == 0 {
		g.order = append(g.order, c.who)
	}
	g.queues[c.who] = append(g.queues[c.who], w)
	g.queued++
	l.joined(g, c.who, now)
	l.dispatch(g)
	l.mu.Unlock()
	l.flush()
	t := time.NewTimer(l.maxWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return &pass{l: l, g: g}, nil
	case <-t.C:
		err = &WaitError{Provider: c.provider, Why: fmt.Sprintf("it did not let the call through within %s", l.maxWait)}
	case <-ctx.Done():
		err = &WaitError{Provider: c.provider, Why: "the call was cancelled while it waited", Err: ctx.Err()}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted { // let through as the wait ended: give the place on
		l.inflight[c.provider]--
		l.dispatchProvider(c.provider)
	} else {
		l.remove(g, c.who, w)
		l.left(g, c.who)
	}
	err.(*WaitError).Until = g.until
	return nil, err
}

func (l *limiter) gate(k gateKey, max, rpm int) *gate {
	g := l.gates[k]
	if g == nil {
		g = &gate{key: k, queues: map[who][]*waiter{}}
		l.gates[k] = g
	}
	g.max, g.rpm = max, rpm
	return g
}

// open says whether a call of g may go upstream now.
func (l *limiter) open(g *gate, now time.Time) bool {
	return !now.Before(g.until) && (g.max <= 0 || l.inflight[g.key.provider] < g.max) &&
		(g.rpm <= 0 || l.recent(g.key.provider, now) < g.rpm)
}

// recent counts the provider's calls let through in the minute before
// now, dropping older ones.
func (l *limiter) recent(provider string, now time.Time) int {
	b := l.begun[provider]
	i := 0
	for i < len(b) && !b[i].After(now.Add(-time.Minute)) {
		i++
	}
	if i > 0 {
		b = b[i:]
		if len(b) == 0 {
			b = nil
		}
		l.begun[provider] = b
	}
	return len(b)
}

// admit counts a call of g let through.
func (l *limiter) admit(g *gate, now time.Time) {
	l.inflight[g.key.provider]++
	if g.rpm > 0 {
		l.begun[g.key.provider] = append(l.begun[g.key.provider], now)
	}
}

// nextOpen is when g may open by itself (its reset, or a minute after the
// oldest call that fills requests_per_minute); zero when only a call
// ending can open it.
func (l *limiter) nextOpen(g *gate, now time.Time) time.Time {
	var at time.Time
	if now.Before(g.until) {
		at = g.until
	}
	if g.rpm > 0 && l.recent(g.key.provider, now) >= g.rpm {
		if t := l.begun[g.key.provider][0].Add(time.Minute); t.After(at) {
			at = t
		}
	}
	return at
}

// dispatch lets waiting calls through while g is open, round-robin
// between containers, and arms a timer for when it opens by itself.
// Gates of one provider share its max_concurrent and requests_per_minute:
// a call over frees a place for any of them. l.mu is held.
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
		l.admit(g, now)
		l.left(g, c)
		close(w.ready)
	}
	if g.queued == 0 {
		return
	}
	at := l.nextOpen(g, now)
	if at.IsZero() || (g.timer != nil && !at.Before(g.timerAt)) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timerAt = at
	g.timer = time.AfterFunc(at.Sub(now), func() {
		l.mu.Lock()
		g.timer = nil
		l.dispatch(g)
		l.mu.Unlock()
		l.flush()
	})
}

// dispatchProvider dispatches every gate of provider: a place under its
// max_concurrent or requests_per_minute is for any of them. l.mu is held.
func (l *limiter) dispatchProvider(provider string) {
	for _, o := range l.gates {
		if o.key.provider == provider {
			l.dispatch(o)
		}
	}
}

// remove takes w out of container c's queue (and c out of the order when
// its queue is empty).
func (l *limiter) remove(g *gate, c who, w *waiter) {
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

// pass is a call of g let through to the provider.
type pass struct {
	l     *limiter
	g     *gate
	limit *Limit // decided (under l.mu)
	once  sync.Once
}

// decide settles, once, until when a limited answer (429, 529) holds its
// provider and account: its reset headers, else a backoff growing with
// the limits in a row, bounded by agent.limit_max_wait. From then on the
// gate holds its calls until that reset (or a later one it holds
// already; kept in the store at done). nil for any other answer. This is
// the only place a reset is worked out: the Observer, the journal, the
// notices and the runner's limits query are all told this one.
func (p *pass) decide(status int, h http.Header) *Limit {
	if !usage.Limited(status) {
		return nil
	}
	l, g := p.l, p.g
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.limit == nil {
		until, src := usage.LimitReset(h, l.now(), g.attempt, l.maxReset)
		g.attempt++
		if until.After(g.until) {
			g.until = until
			l.dirty = true
		}
		p.limit = &Limit{Until: until, Source: src}
	}
	return p.limit
}

// done ends the call: a limited answer not decided yet is decided now, a
// successful one ends the limits in a row, and a place of the provider is
// free for any of its gates.
func (p *pass) done(status int, h http.Header) {
	p.once.Do(func() {
		p.decide(status, h)
		l, g := p.l, p.g
		l.mu.Lock()
		if status > 0 && status < 400 {
			g.attempt = 0
		}
		l.inflight[g.key.provider]--
		l.dispatchProvider(g.key.provider)
		l.mu.Unlock()
		l.flush()
		l.save()
	})
}

// resetOf says until when provider and account are limited (zero when
// they never were).
func (l *limiter) resetOf(provider, account string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.gates[gateKey{provider, account}]; g != nil {
		return g.until
	}
	return time.Time{}
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
