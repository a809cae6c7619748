package orchestrator

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/engine"
)

// oomRetry spaces re-subscriptions after the event stream broke.
const oomRetry = time.Second

// watchOOM records the ids of our containers the engine reported oom for,
// until ctx ends.
func (m *Manager) watchOOM(ctx context.Context, src engine.EventSource) {
	for ctx.Err() == nil {
		evs, errs := src.Events(ctx, m.selector(nil))
		for e := range evs {
			if e.Action == "oom" {
				m.mu.Lock()
				m.oomed[e.ContainerID] = true
				m.mu.Unlock()
			}
		}
		if err := <-errs; err != nil && ctx.Err() == nil {
			m.log.Warn("engine event stream broke; subscribing again", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(oomRetry):
		}
	}
}

// sawOOM reports (and forgets) an oom event for the container.
func (m *Manager) sawOOM(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := m.oomed[id]
	delete(m.oomed, id)
	return ok
}
