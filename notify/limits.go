package notify

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/gateway"
)

// limitBatch is how long the notice of a provider's limit waits for the
// other containers whose calls begin to wait for the same reset: one
// notice names them all.
const limitBatch = 2 * time.Second

// LimitNotices turns the start of a provider's limit into a
// limit-wait-started notice: a limited answer (429 or 529, with the reset
// the gateway decided for it) seen by the gateway's Observer, or calls the gateway began to hold for
// the reset (its wait notes). One notice per limit and swarm: each names
// its swarm's repository and containers limited or held within limitBatch
// of the first, and its time is when the limit was first seen (of any
// swarm); nothing more is told of that provider until the reset it named
// has passed. Waits for a place (max_concurrent, requests_per_minute) and
// ends are no notice. The notifier and the swarms' repositories are set
// once they are built (after the gateway).
type LimitNotices struct {
	log   *slog.Logger
	batch time.Duration
	now   func() time.Time

	mu      sync.Mutex
	n       *Notifier
	repoOf  func(swarmID string) string // "" when unknown
	pending map[string]*limitNotice     // provider -> the notice being gathered
	told    map[string]time.Time        // provider -> the reset last told
}

type limitNotice struct {
	since, until time.Time
	swarms       map[string][]string // swarm -> its containers limited
}

// NewLimitNotices makes the limit notices; Set gives them their notifier.
func NewLimitNotices(log *slog.Logger) *LimitNotices {
	return &LimitNotices{log: log, batch: limitBatch, now: time.Now,
		pending: map[string]*limitNotice{}, told: map[string]time.Time{}}
}

// Set gives l the notifier to send through and the repository of each
// swarm; until then nothing is told.
func (l *LimitNotices) Set(n *Notifier, repoOf func(swarmID string) string) {
	l.mu.Lock()
	l.n, l.repoOf = n, repoOf
	l.mu.Unlock()
}

// limited hears a call's answer (it must not block): a limited one tells
// the reset the gateway decided for it.
func (l *LimitNotices) limited(c *gateway.Call) {
	if c.Refused != "" || c.Limit == nil {
		return
	}
	l.add(c.Provider, l.now(), c.Limit.Until, c.Swarm, c.Container)
}

// waited hears one of the gateway's wait notes (it must not block).
func (l *LimitNotices) waited(w gateway.WaitNote) {
	if w.Reason != gateway.WaitLimit || !w.Ended.IsZero() || w.Until.IsZero() {
		return
	}
	since := w.Since
	if since.IsZero() {
		since = l.now()
	}
	l.add(w.Provider, since, w.Until, w.Swarm, w.Container)
}

func (l *LimitNotices) add(provider string, since, until time.Time, swarm, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil || l.now().Before(l.told[provider]) {
		return // no notifier, or within the limit told last
	}
	p := l.pending[provider]
	if p == nil {
		p = &limitNotice{since: since, swarms: map[string][]string{}}
		l.pending[provider] = p
		time.AfterFunc(l.batch, func() { l.flush(provider) })
	}
	if since.Before(p.since) {
		p.since = since
	}
	if until.After(p.until) {
		p.until = until
	}
	if !slices.Contains(p.swarms[swarm], container) {
		p.swarms[swarm] = append(p.swarms[swarm], container)
	}
}

func (l *LimitNotices) flush(provider string) {
	l.mu.Lock()
	p, n, repoOf := l.pending[provider], l.n, l.repoOf
	delete(l.pending, provider)
	if p != nil {
		l.told[provider] = p.until
	}
	l.mu.Unlock()
	if p == nil {
		return
	}
	for _, swarm := range slices.Sorted(maps.Keys(p.swarms)) {
		lim := Limit{Provider: provider, Since: p.since, Until: p.until, SwarmID: swarm, Containers: slices.Sorted(slices.Values(p.swarms[swarm]))}
		if repoOf != nil && swarm != "" {
			lim.Repo = repoOf(swarm)
		}
		l.log.Info("model provider limited: notice sent", "provider", provider, "since", p.since, "until", p.until,
			"repo", lim.Repo, "swarm", swarm, "containers", lim.Containers)
		n.LimitWait(lim)
	}
}

// Tee is the gateway's Observer o with every answer and wait note also
// heard by l.
func (l *LimitNotices) Tee(o gateway.Observer) gateway.Observer { return waitTee{o, l} }

// waitTee is Tee's Observer.
type waitTee struct {
	gateway.Observer
	limits *LimitNotices
}

// Begin implements gateway.Observer.
func (t waitTee) Begin(c *gateway.Call) gateway.Tap {
	t.limits.limited(c)
	return t.Observer.Begin(c)
}

// Waited implements gateway.WaitObserver.
func (t waitTee) Waited(w gateway.WaitNote) {
	if wo, ok := t.Observer.(gateway.WaitObserver); ok {
		wo.Waited(w)
	}
	t.limits.waited(w)
}
