package main

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/notify"
	"github.com/aimi-tools/swarm/usage"
)

// limitBatch is how long the notice of a provider's limit waits for the
// other containers whose calls begin to wait for the same reset: one
// notice names them all.
const limitBatch = 2 * time.Second

// limitNotices turns the start of a provider's limit into a
// limit-wait-started notice: a limited answer (429 or 529, with its reset)
// seen by the gateway's Observer, or calls the gateway began to hold for
// the reset (its wait notes). One notice per limit: it names the
// containers limited or held within limitBatch of the first, and nothing
// more is told of that provider until the reset it named has passed.
// Waits for a place (max_concurrent, requests_per_minute) and ends are no
// notice. The notifier is set once it is built (after the gateway).
type limitNotices struct {
	log     *slog.Logger
	maxWait time.Duration // agent.limit_max_wait: bounds a reset
	batch   time.Duration
	now     func() time.Time

	mu      sync.Mutex
	n       *notify.Notifier
	pending map[string]*limitNotice // provider -> the notice being gathered
	told    map[string]time.Time    // provider -> the reset last told
}

type limitNotice struct {
	until      time.Time
	swarms     map[string]bool
	containers []string
}

func newLimitNotices(maxWait time.Duration, log *slog.Logger) *limitNotices {
	return &limitNotices{log: log, maxWait: maxWait, batch: limitBatch, now: time.Now,
		pending: map[string]*limitNotice{}, told: map[string]time.Time{}}
}

func (l *limitNotices) set(n *notify.Notifier) {
	l.mu.Lock()
	l.n = n
	l.mu.Unlock()
}

// limited hears a call's answer (it must not block).
func (l *limitNotices) limited(c *gateway.Call) {
	if c.Refused != "" || !usage.Limited(c.Status) {
		return
	}
	until, _ := usage.LimitReset(c.Header, l.now(), 0, l.maxWait)
	l.add(c.Provider, until, c.Swarm, c.Container)
}

// waited hears one of the gateway's wait notes (it must not block).
func (l *limitNotices) waited(w gateway.WaitNote) {
	if w.Reason != gateway.WaitLimit || !w.Ended.IsZero() || w.Until.IsZero() {
		return
	}
	l.add(w.Provider, w.Until, w.Swarm, w.Container)
}

func (l *limitNotices) add(provider string, until time.Time, swarm, container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil || l.now().Before(l.told[provider]) {
		return // no notifier, or within the limit told last
	}
	p := l.pending[provider]
	if p == nil {
		p = &limitNotice{swarms: map[string]bool{}}
		l.pending[provider] = p
		time.AfterFunc(l.batch, func() { l.flush(provider) })
	}
	if until.After(p.until) {
		p.until = until
	}
	p.swarms[swarm] = true
	if !slices.Contains(p.containers, container) {
		p.containers = append(p.containers, container)
	}
}

func (l *limitNotices) flush(provider string) {
	l.mu.Lock()
	p, n := l.pending[provider], l.n
	delete(l.pending, provider)
	if p != nil {
		l.told[provider] = p.until
	}
	l.mu.Unlock()
	if p == nil {
		return
	}
	swarm := ""
	if len(p.swarms) == 1 {
		for s := range p.swarms {
			swarm = s
		}
	}
	slices.Sort(p.containers)
	l.log.Info("model provider limited: notice sent", "provider", provider, "until", p.until, "containers", p.containers)
	n.LimitWait(provider, p.until, swarm, p.containers)
}

// waitTee is the gateway's Observer: the usage observer, with every answer
// and wait note also heard by the limit notices.
type waitTee struct {
	gateway.Observer
	limits *limitNotices
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
