package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// Observer hears what the Manager does, for metrics. Its methods run on the
// goroutine that did the work (a supervisor, a recorder's saver) and must
// return at once: they only count.
type Observer interface {
	// Event sees every event the Manager publishes, before any subscriber
	// (which may lose events when slow; the observer never does).
	Event(api.Event)
	// StateSaved is called after each state file save with how long the
	// oldest change it carries waited.
	StateSaved(lag time.Duration)
	// JournalAppended is called with the bytes of each journal record.
	JournalAppended(n int)
}

// heartbeat records when a loop of the Manager last went round, so that
// Health can tell a live daemon from one whose HTTP server answers while
// its loops are stuck.
type heartbeat struct{ last atomic.Int64 }

func (h *heartbeat) beat() { h.last.Store(time.Now().UnixNano()) }
func (h *heartbeat) age() time.Duration {
	return time.Since(time.Unix(0, h.last.Load()))
}

// staleLoop is how long the state-file watch (which goes round every
// foreignPoll) may go without a round before Health fails.
const staleLoop = 15 * foreignPoll

// Health returns nil when the Manager's loops answer: its lock is free
// within ctx, the state-file watch went round recently, and no swarm's
// state saves are failing (the error says which and why).
func (m *Manager) Health(ctx context.Context) error {
	locked := make(chan []*swarm, 1)
	go func() {
		m.mu.Lock()
		sws := slices.Collect(maps.Values(m.swarms))
		m.mu.Unlock()
		locked <- sws
	}()
	var sws []*swarm
	select {
	case sws = <-locked:
	case <-ctx.Done():
		return fmt.Errorf("the orchestrator's lock did not free within the health check's deadline: %w", ctx.Err())
	}
	if age := m.beat.age(); age > staleLoop {
		return fmt.Errorf("the state-file watch has not gone round for %s (it goes round every %s)", age.Round(time.Second), foreignPoll)
	}
	var errs []error
	for _, sw := range sws {
		led := sw.led
		if led == nil {
			continue
		}
		if err := led.saveErr(); err != nil {
			errs = append(errs, fmt.Errorf("swarm %s in %q: state saves failing: %w", sw.id, sw.repo, err))
		}
	}
	return errors.Join(errs...)
}

// recorderOptions are the options of every swarm's recorder: the Manager's
// logger and the observer's hooks.
func (m *Manager) recorderOptions() state.RecorderOptions {
	opts := state.RecorderOptions{Logger: m.log}
	if o := m.cfg.Observer; o != nil {
		opts.OnSave = o.StateSaved
		opts.OnAppend = o.JournalAppended
	}
	return opts
}
