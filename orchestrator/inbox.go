package orchestrator

import (
	"context"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// Publish sends an event of another part of the daemon (the inbox of
// permission requests) to Subscribe's subscribers.
func (m *Manager) Publish(e api.Event) { m.publish(e) }

// byID finds the swarm with this id.
func (m *Manager) byID(swarmID string) *swarm {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sw := range m.swarms {
		if sw.id == swarmID {
			return sw
		}
	}
	return nil
}

// Running reports whether the container is a non-terminal container of a
// swarm this daemon holds.
func (m *Manager) Running(sb contract.Sandbox) bool {
	sw := m.byID(sb.Swarm)
	return sw != nil && sw.find(sb.Container) != nil && !sw.terminal(sb.Container)
}

// JournalNote writes text as a daemon line into a container's journal (the
// inbox's requests, answers and refusals). A container no longer held is
// skipped.
func (m *Manager) JournalNote(ctx context.Context, sb contract.Sandbox, text string) {
	swarmID, name := sb.Swarm, sb.Container
	sw := m.byID(swarmID)
	if sw == nil || sw.find(name) == nil || sw.led == nil {
		return
	}
	rec := state.Record{Stream: state.StreamDaemon, Reason: "inbox"}
	rec.SetRaw([]byte(text))
	if err := sw.led.record(ctx, name, rec, nil, &lineResult{}); err != nil {
		m.log.Warn("journal a permission request note", "swarm", swarmID, "container", name, "err", err)
	}
}
