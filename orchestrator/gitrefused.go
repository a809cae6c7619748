package orchestrator

import (
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// noteGitRefused journals a request the git service refused container sb
// as a daemon record (state.TypeGitRefused, the service's reason) and
// counts it in the view. A container this daemon does not hold (yet:
// before Recover adopted it) is skipped; the service logged the refusal.
func (m *Manager) noteGitRefused(sb contract.Sandbox, reason string) {
	sw := m.byID(sb.Swarm)
	if sw == nil || sw.led == nil {
		return
	}
	c := sw.find(sb.Container)
	if c == nil {
		return
	}
	rec := state.Record{Stream: state.StreamDaemon, Type: state.TypeGitRefused, Reason: reason}
	if err := sw.led.note(m.life, sb.Container, rec); err != nil {
		m.log.Warn("journal a git refusal", "swarm", sb.Swarm, "container", sb.Container, "err", err)
		return
	}
	sw.mu.Lock()
	c.gitRefused++
	sw.mu.Unlock()
}
