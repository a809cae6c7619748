package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// JournalUsage journals the account of one model call a container made
// through the model gateway, in that container's journal. A call of a
// swarm or container the daemon no longer runs is dropped with an error.
// The record's time is when the call began (at), so that a reader can
// tell which story made it.
func (m *Manager) JournalUsage(ctx context.Context, sb contract.Sandbox, at time.Time, call usage.Call) error {
	swarmID, containerName := sb.Swarm, sb.Container
	m.mu.Lock()
	var sw *swarm
	for _, s := range m.swarms {
		if s.id == swarmID {
			sw = s
		}
	}
	m.mu.Unlock()
	if sw == nil || sw.led == nil {
		return fmt.Errorf("journal a model call of %s: swarm %s is not running here", containerName, swarmID)
	}
	sw.led.mu.RLock()
	defer sw.led.mu.RUnlock()
	return sw.led.rec.Record(ctx, containerName, state.Record{Stream: state.StreamDaemon, Type: "usage", Time: at.UTC(), Usage: &call}, nil)
}
