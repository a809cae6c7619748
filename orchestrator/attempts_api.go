package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/state"
)

// Pick makes the attempt req.Name its task file's pick instead of the
// daemon's (aimi swarm pick). Before the task file's branch landed, the
// branch is moved from the attempt picked before to this one's tip (a
// compare-and-swap; refused when it holds anything else); after, nothing
// landed is rewritten: this attempt is landed instead. The pick is
// written into the state file before anything moves, so a restarted
// daemon finishes what it began.
func (m *Manager) Pick(ctx context.Context, req api.PickRequest) (api.SwarmView, error) {
	sw, unlock, err := m.lockedSwarm(ctx, req.RepoPath)
	if err != nil {
		return api.SwarmView{}, err
	}
	defer unlock()
	c := sw.find(req.Name)
	if c == nil {
		return api.SwarmView{}, fmt.Errorf("%w: %q", api.ErrUnknownContainer, req.Name)
	}
	g := sw.groupOf(c)
	if g == nil {
		return api.SwarmView{}, &api.FieldError{Field: "name", Reason: fmt.Sprintf("%s is not an attempt: its task file runs once (start with --attempts N to run it several times)", c.name)}
	}
	if !sw.groupEnded(g) {
		return api.SwarmView{}, &api.FieldError{Field: "name", Reason: fmt.Sprintf("attempts of %s are still running; pick once they ended (or stop them with 'aimi swarm stop')", c.taskFile)}
	}
	g.pickMu.Lock()
	defer g.pickMu.Unlock()
	sw.mu.Lock()
	set := g.setLocked()
	ctrs := g.ctrs
	sw.mu.Unlock()
	a := set.Attempt(c.name)
	if a == nil || (a.Tip == "" && sw.attemptPublisher() != nil) {
		return api.SwarmView{}, &api.FieldError{Field: "name", Reason: fmt.Sprintf("%s pushed no commit; pick an attempt with work ('aimi swarm status' lists them)", c.name)}
	}
	prev := set.Pick
	if prev != nil && prev.ContainerName == c.name {
		return sw.view(), nil
	}
	p := &state.AttemptPick{Attempt: a.Attempt, ContainerName: c.name, Tip: a.Tip, By: state.PickByHand, At: time.Now().UTC(), Reason: "picked by hand"}
	landed := false
	if prev != nil && prev.ContainerName != "" {
		p.Previous, p.PreviousTip = prev.Attempt, prev.Tip
		p.Reason = fmt.Sprintf("picked by hand instead of attempt %d", prev.Attempt)
		landed = sw.landed(prev.ContainerName)
	}
	set.Pick = p
	if err := sw.writeSets(ctx, set); err != nil {
		return api.SwarmView{}, fmt.Errorf("record the pick in the state file (nothing changed; pick again): %w", err)
	}
	sw.mu.Lock()
	g.set = set.Clone()
	sw.mu.Unlock()
	sw.pickedEvent(set)
	if landed {
		// What landed stays; the new pick lands after it, as a fix-up
		// would (land.go).
		m.wg.Go(func() {
			// Named in the order: landed even with failed stories, as
			// the person picked it.
			if _, err := m.land(m.life, api.LandRequest{RepoPath: sw.repo, Order: []string{c.name}}, []string{c.name}); err != nil {
				m.log.Warn("land the attempt picked by hand; 'aimi swarm land' tries again", "swarm", sw.id, "container", c.name, "err", err)
			}
		})
		return sw.view(), nil
	}
	if err := sw.publishPick(ctx, set, ctrs, p.PreviousTip); err != nil {
		return sw.view(), fmt.Errorf("the pick is recorded, but %s was not moved: %w", set.BranchName, err)
	}
	return sw.view(), nil
}

// landed reports whether the swarm's last land landed the container.
func (sw *swarm) landed(name string) bool {
	rep := sw.landView()
	if rep == nil {
		return false
	}
	return slices.ContainsFunc(rep.Results, func(r api.LandResult) bool {
		return r.Container == name && r.Outcome == string(land.Landed)
	})
}

// onlyPicked leaves out of a land's queue the attempts that are not their
// task file's pick (and those whose task file has none yet), and says so
// of every such attempt the land skips, whatever else it would say.
func (sw *swarm) onlyPicked(queue []*ctr, skipped []api.Kept) ([]*ctr, []api.Kept) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := queue[:0:0]
	for _, c := range queue {
		if why := sw.notPickedLocked(c); why != "" {
			skipped = append(skipped, api.Kept{Name: c.name, Reason: why})
			continue
		}
		out = append(out, c)
	}
	for i, k := range skipped {
		for _, c := range sw.ctrs {
			if c.name == k.Name {
				if why := sw.notPickedLocked(c); why != "" {
					skipped[i].Reason = why
				}
			}
		}
	}
	return out, skipped
}

// notPickedLocked says why c does not land as an attempt that is not its
// task file's pick; "" for a pick or a task file run once. Caller holds
// sw.mu.
func (sw *swarm) notPickedLocked(c *ctr) string {
	g := sw.groups[c.taskFile]
	if c.attempt == 0 || g == nil {
		return ""
	}
	switch p := g.set.Pick; {
	case p != nil && p.ContainerName == c.name:
		return ""
	case p == nil || p.ContainerName == "":
		return fmt.Sprintf("attempt %d of %s, which has no pick: only a task file's picked attempt lands ('aimi swarm pick %s' picks it)", c.attempt, g.set.BranchName, c.name)
	default:
		return fmt.Sprintf("attempt %d of %s, not picked (attempt %d is; 'aimi swarm pick %s' changes that)", c.attempt, g.set.BranchName, p.Attempt, c.name)
	}
}
