package orchestrator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// Adoption (a restart, or a swarm loaded lazily) is a plan made from what
// was observed, then carried out: planAdoption decides, without an engine
// or a file, what happens to each state entry, and its String says so, so
// the rules are tested as text (adoptplan_test.go).

// entryFacts is what adoption observed about one state entry.
type entryFacts struct {
	name    string
	journal bool        // its journal exists
	found   bool        // the engine has its container (ours, for this swarm)
	info    engine.Info // the container, when found
	// foreign is why the entry names a container this daemon did not make
	// for this swarm ("" when it is ours).
	foreign string
	// Known for a tracked entry (ours) only:
	stopAsked bool                  // the state file says stopped (another tool asked)
	status    state.ContainerStatus // the journal's fold
	published bool                  // a completed local container's branch reached the checkout
}

// notMade is an entry of neither a container of this daemon nor a
// journal: another tool's (the aimi shell tool runs containers of its
// own); tracking it would fail it as lost and rewrite it.
func (f entryFacts) notMade() bool { return !f.found && !f.journal }

// needsPublished says whether the plan asks if the entry's branch was
// published: only a completed container of a local-mode swarm may be
// waiting to be.
func needsPublished(local bool, status state.ContainerStatus) bool {
	return local && status == state.StatusCompleted
}

// adoptAction is what adoption does with one entry.
type adoptAction int

const (
	actLeave  adoptAction = iota // not made by aimid: left as it is, untracked
	actKeep                      // a foreign container: kept, reported, untracked
	actDone                      // terminal: tracked, nothing to run
	actFinish                    // decided now from the facts (missing, stopped)
	actLaunch                    // a supervisor in a mode (attach, start, finish)
	actSettle                    // completed, branch unpublished: publish
)

// adoptStep is one line of the plan.
type adoptStep struct {
	name   string
	action adoptAction
	mode   supMode    // actLaunch
	facts  *exitFacts // actFinish
	stop   bool       // a stop was asked while no daemon watched
	why    string
}

// adoptPlan is what adoption will do, in order.
type adoptPlan struct {
	// network: the swarm's network (and the git service on it) is needed
	// again, for a local swarm with containers still to run or decide.
	network bool
	steps   []adoptStep
}

// planAdoption decides every entry's fate. Untracked and terminal entries
// keep the state file's order; then the ones that run or are decided,
// running containers first (they take their slots before any pending one
// may start), then the settles.
func planAdoption(local bool, entries []entryFacts) adoptPlan {
	var p adoptPlan
	var run, settle []adoptStep
	for _, f := range entries {
		s := adoptStep{name: f.name}
		switch {
		case f.notMade():
			s.action, s.why = actLeave, "not made by aimid"
		case f.foreign != "":
			s.action, s.why = actKeep, f.foreign
		case f.status.Terminal():
			s.action, s.why = actDone, string(f.status)
			if needsPublished(local, f.status) && !f.published {
				s.action, s.why = actSettle, "branch not published"
				settle = append(settle, s)
				continue
			}
		default:
			s.stop = f.stopAsked
			s.mode, s.facts = classify(f.info, f.found)
			s.action = actLaunch
			if s.facts != nil {
				s.action = actFinish
			}
			run = append(run, s)
			continue
		}
		p.steps = append(p.steps, s)
	}
	p.network = local && len(run) > 0
	slices.SortStableFunc(run, func(a, b adoptStep) int { return rank(a.mode, a.facts) - rank(b.mode, b.facts) })
	p.steps = append(append(p.steps, run...), settle...)
	return p
}

var modeNames = map[supMode]string{modeFresh: "start", modeAttach: "attach", modeFinish: "finish", modeSettle: "settle"}

// String prints the plan, a line a step.
func (p adoptPlan) String() string {
	var b strings.Builder
	if p.network {
		b.WriteString("network: ensure\n")
	}
	for _, s := range p.steps {
		var what string
		switch s.action {
		case actLeave:
			what = "leave"
		case actKeep:
			what = "keep"
		case actDone:
			what = "done"
		case actSettle:
			what = "settle"
		case actFinish:
			what = "decide " + s.facts.String()
		case actLaunch:
			what = "launch " + modeNames[s.mode]
		}
		if s.stop {
			what += ", stop asked"
		}
		if s.why != "" {
			what += " (" + s.why + ")"
		}
		fmt.Fprintf(&b, "%s: %s\n", s.name, what)
	}
	return b.String()
}

// String names the facts a plan decides from.
func (f exitFacts) String() string {
	switch {
	case f.missing:
		return "missing"
	case f.stopped:
		return "stopped"
	}
	return fmt.Sprintf("exit %d", f.code)
}
