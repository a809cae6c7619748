package egress

import (
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// maxGrantsPerSwarm bounds what one swarm's answers may add (a person
// answers; the agents decide how many hosts they ask for).
const maxGrantsPerSwarm = 256

// Grant is a host a person let a swarm's containers reach (egress.ask):
// Scope says which and for how long.
type Grant struct {
	Scope     string // ScopeOnce, ScopeContainer or ScopeSwarm
	Swarm     string
	Container string   // "" for ScopeSwarm
	Stories   []string // ScopeOnce: the stories it was granted for
	Host      string
	Port      int
	Private   bool   // may resolve into a private range (the person was told)
	By        string // who answered ("person")
	Who       string // the person's user, when known ("alice, uid 1000")
	At        time.Time
}

// Rule is what g allows.
func (g Grant) Rule() Rule { return GrantRule(g.Host, g.Port, g.Private) }

// covers reports whether g is sb's (its story aside).
func (g Grant) covers(sb contract.Sandbox) bool {
	return g.Swarm == sb.Swarm && (g.Scope == ScopeSwarm || g.Container == sb.Container)
}

// Grants are the grants in force. A grant ends with its scope: a
// container's with EndContainer, a swarm's with EndSwarm, a story's when
// Live says none of its stories runs any longer. Nothing is kept across
// a daemon restart (the journal has them): a restarted daemon asks again.
type Grants struct {
	// Live reports whether any of stories still runs in sb (ScopeOnce);
	// nil: a story's grant lasts as its container's.
	live func(sb contract.Sandbox, stories []string) bool

	mu  sync.Mutex
	all map[string][]Grant // by swarm
}

// NewGrants returns an empty set; live tells whether a story runs.
func NewGrants(live func(sb contract.Sandbox, stories []string) bool) *Grants {
	return &Grants{live: live, all: map[string][]Grant{}}
}

// Add puts g in force; false when its swarm has maxGrantsPerSwarm.
func (gs *Grants) Add(g Grant) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	l := gs.all[g.Swarm]
	if len(l) >= maxGrantsPerSwarm {
		return false
	}
	gs.all[g.Swarm] = append(l, g)
	return true
}

// Of lists sb's grants in force, oldest first.
func (gs *Grants) Of(sb contract.Sandbox) []Grant {
	gs.mu.Lock()
	l := slices.Clone(gs.all[sb.Swarm])
	gs.mu.Unlock()
	out := l[:0]
	for _, g := range l {
		if !g.covers(sb) {
			continue
		}
		if g.Scope == ScopeOnce && gs.live != nil && len(g.Stories) > 0 && !gs.live(sb, g.Stories) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// Rules are the rules sb's grants add.
func (gs *Grants) Rules(sb contract.Sandbox) []Rule {
	var out []Rule
	for _, g := range gs.Of(sb) {
		out = append(out, g.Rule())
	}
	return out
}

// EndContainer ends sb's own grants (ScopeOnce, ScopeContainer).
func (gs *Grants) EndContainer(sb contract.Sandbox) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	l := slices.DeleteFunc(gs.all[sb.Swarm], func(g Grant) bool { return g.Scope != ScopeSwarm && g.Container == sb.Container })
	if len(l) == 0 {
		delete(gs.all, sb.Swarm)
		return
	}
	gs.all[sb.Swarm] = l
}

// EndSwarm ends every grant of swarm.
func (gs *Grants) EndSwarm(swarm string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.all, swarm)
}
