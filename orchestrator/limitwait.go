package orchestrator

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// ModelWaits is a ModelAccess that also tells which containers' calls it
// holds (the model gateway, for a provider's limit or its concurrency
// bounds): the view shows them. The state file has no place for them.
type ModelWaits interface {
	// LimitWaits are swarmID's waiting calls by container name.
	LimitWaits(swarmID string) map[string][]api.LimitWait
}

// limitWaits asks the model gateway, when it tells, for swarmID's waits.
func (m *Manager) limitWaits(swarmID string) map[string][]api.LimitWait {
	if mw, ok := m.cfg.Models.(ModelWaits); ok {
		return mw.LimitWaits(swarmID)
	}
	return nil
}

// NoteLimitWait journals that a container's calls began waiting at the
// model gateway (over false) or went on after it, as a daemon record
// whose reason is api.EventLimitWait, and publishes it as a limit-wait
// or limit-wait-over event. A container no longer held is skipped.
func (m *Manager) NoteLimitWait(ctx context.Context, sb contract.Sandbox, at time.Time, over bool, text string) {
	swarmID, name := sb.Swarm, sb.Container
	sw := m.byID(swarmID)
	if sw == nil || sw.find(name) == nil || sw.led == nil {
		return
	}
	rec := state.Record{Stream: state.StreamDaemon, Reason: string(api.EventLimitWait), Time: at.UTC()}
	rec.SetRaw([]byte(text))
	if err := sw.led.record(ctx, name, rec, nil, &lineResult{}); err != nil {
		m.log.Warn("journal a limit wait", "swarm", swarmID, "container", name, "err", err)
	}
	kind := api.EventLimitWait
	if over {
		kind = api.EventLimitWaitOver
	}
	m.publish(api.Event{Time: at.UTC(), SwarmID: swarmID, RepoPath: sw.repo, ContainerName: name, Kind: kind, Output: text})
}

// RepoOf is the repository of the swarm swarmID ("" when none is held):
// a limit wait's notice names it.
func (m *Manager) RepoOf(swarmID string) string {
	if sw := m.byID(swarmID); sw != nil {
		return sw.repo
	}
	return ""
}
