package orchestrator

import (
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// noteGitRefused journals a request the git service refused container sb
// as a daemon record (state.TypeGitRefused, the service's reason) and
// counts it in the view (noteRefusal). A container this daemon does not
// hold (yet: before Recover adopted it) is skipped; the service logged
// the refusal.
func (m *Manager) noteGitRefused(sb contract.Sandbox, reason string) {
	sw := m.byID(sb.Swarm)
	if sw == nil || sw.led == nil || sw.find(sb.Container) == nil {
		return
	}
	rec := state.Record{Stream: state.StreamDaemon, Type: state.TypeGitRefused, Reason: reason}
	sw.noteRefusal(sb.Container, rec, func(c *ctr) { c.gitRefused++ })
}
