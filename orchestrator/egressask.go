package orchestrator

import (
	"slices"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// EgressViewer is a SandboxNet that tells a running container's egress
// rules: the config's, its repository's, its origin's and those a person
// granted it (egress.ask). The status view and the board show them.
type EgressViewer interface {
	// EgressRules are sb's rules in force; nil when it is not served.
	EgressRules(sb contract.Sandbox) *api.EgressRules
}

// egressRules asks the SandboxNet, when it tells, for sb's rules.
func (m *Manager) egressRules(sb contract.Sandbox) *api.EgressRules {
	if ev, ok := m.cfg.Net.(EgressViewer); ok {
		return ev.EgressRules(sb)
	}
	return nil
}

// StoriesRunning lists the stories container sb reported in progress and
// has not finished (a grant of scope once lasts as long as one of them).
func (m *Manager) StoriesRunning(sb contract.Sandbox) []string {
	sw := m.byID(sb.Swarm)
	if sw == nil || sw.led == nil || sw.find(sb.Container) == nil || sw.terminal(sb.Container) {
		return nil
	}
	var out []string
	for id, st := range sw.led.stories(sb.Container) {
		if st == tasks.InProgress {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
