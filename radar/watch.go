package radar

import (
	"context"
	"time"
)

// Duty is the share of wall time a swarm's radar may spend looking: after
// a look that took d, the next waits (1/Duty - 1)·d. A radar's merges run
// one at a time, so this bounds its CPU too (about one core times Duty),
// whatever the rate of pushes: they coalesce into the next look.
const Duty = 0.08

// Watcher runs looks when kicked: one at a time, any number of kicks
// during a look or its pause coalesced into one more look.
type Watcher struct {
	kick chan struct{}
}

// NewWatcher is a Watcher with no look pending.
func NewWatcher() *Watcher { return &Watcher{kick: make(chan struct{}, 1)} }

// Kick asks for a look; it never blocks.
func (w *Watcher) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run calls look after each kick until ctx ends or look returns false,
// pausing after each look so that looks take at most Duty of the time:
// look says what it cost (the CPU its git took, Report.CPU), or 0 to be
// weighed by its wall time.
func (w *Watcher) Run(ctx context.Context, look func(context.Context) (cost time.Duration, goOn bool)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		start := time.Now()
		cost, goOn := look(ctx)
		if !goOn {
			return
		}
		if cost <= 0 {
			cost = time.Since(start)
		}
		pause := time.Duration(float64(cost) * (1/Duty - 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}
