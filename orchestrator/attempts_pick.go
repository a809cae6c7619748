package orchestrator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// AttemptPublisher is what a task file run several times needs of the
// Publisher (package publish's has it): each attempt's commits kept in
// the checkout, the picked one's published as the task file's branch.
type AttemptPublisher interface {
	KeepAttempt(ctx context.Context, cb contract.ContainerBranch, ref string) (tip string, err error)
	PublishAs(ctx context.Context, cb contract.ContainerBranch, target, replace string) (prURL *string, err error)
}

// attemptPublisher is the Publisher's AttemptPublisher in local git mode,
// nil otherwise (remote mode: the attempts' branches are on origin, and
// the pick is recorded only).
func (sw *swarm) attemptPublisher() AttemptPublisher {
	if !sw.local {
		return nil
	}
	ap, _ := sw.m.cfg.Publisher.(AttemptPublisher)
	return ap
}

// attemptEnded is the end of one attempt of a task file run several
// times: its commits are kept in the checkout, a qualified one stops the
// others under first-verified, and the last to end picks.
func (sw *swarm) attemptEnded(ctx context.Context, c *ctr) {
	g := sw.groupOf(c)
	if g == nil {
		return
	}
	sw.keepAttempt(ctx, g, c)
	if sw.stopsEarly(g) && sw.qualifies(c) {
		sw.stopOthers(g, c)
	}
	if !sw.groupEnded(g) {
		sw.saveAttempts(ctx)
		return
	}
	sw.pickGroup(ctx, g)
}

// keepAttempt fetches c's branch into the checkout at its attempt ref
// and notes where (local mode; again after a restart: the ref is c's own).
func (sw *swarm) keepAttempt(ctx context.Context, g *attemptGroup, c *ctr) {
	ap := sw.attemptPublisher()
	if ap == nil {
		return
	}
	ref := contract.AttemptRef(sw.sandbox(c))
	tip, err := ap.KeepAttempt(ctx, sw.branchOf(c), ref)
	if err != nil {
		sw.m.log.Warn("keep an attempt's commits in the checkout", "swarm", sw.id, "container", c.name, "err", err)
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	g.setLocked()
	if a := g.set.Attempt(c.name); a != nil && tip != "" {
		a.KeptRef, a.Tip = ref, tip
	}
}

// keepBeforeCleanup takes the commits of the attempts a cleanup removes
// to their attempt refs first (again: their end did, unless the daemon
// stopped meanwhile), so that the git service's copy can go too.
func (sw *swarm) keepBeforeCleanup(ctx context.Context, gone []*ctr) {
	for _, c := range gone {
		if g := sw.groupOf(c); g != nil {
			sw.keepAttempt(ctx, g, c)
		}
	}
	sw.saveAttempts(ctx)
}

// stopsEarly reports whether g's attempts stop once one qualifies.
func (sw *swarm) stopsEarly(g *attemptGroup) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return g.set.Stop == attempts.StopFirstVerified
}

// qualifies reports whether c completed every story (each passed the
// verify command after its commit, so its last commit passed it).
func (sw *swarm) qualifies(c *ctr) bool {
	e := sw.led.container(c.name)
	if e == nil || e.Status != state.StatusCompleted {
		return false
	}
	p := e.StoryProgress
	return p.Failed == 0 && p.Pending == 0 && p.InProgress == 0 && p.Completed > 0
}

// groupEnded reports whether every attempt of g is terminal.
func (sw *swarm) groupEnded(g *attemptGroup) bool {
	sw.mu.Lock()
	ctrs := g.ctrs
	sw.mu.Unlock()
	for _, c := range ctrs {
		if !sw.terminal(c.name) {
			return false
		}
	}
	return true
}

// stopOthers stops g's attempts still running once won qualified; their
// commits so far are kept as any stopped container's (and in their
// attempt refs when they end).
func (sw *swarm) stopOthers(g *attemptGroup, won *ctr) {
	var names []string
	sw.mu.Lock()
	g.setLocked()
	for _, c := range g.ctrs {
		if c != won && !sw.led.status(c.name).Terminal() {
			names = append(names, c.name)
			if a := g.set.Attempt(c.name); a != nil {
				a.StoppedEarly = true
			}
		}
	}
	sw.mu.Unlock()
	if len(names) == 0 {
		return
	}
	sw.m.log.Info("attempt qualified; stopping the others (swarm.attempts_stop first-verified)", "swarm", sw.id, "qualified", won.name, "stopping", names)
	sw.m.wg.Go(func() {
		if err := sw.stop(sw.m.life, names); err != nil {
			sw.m.log.Warn("stop the other attempts", "swarm", sw.id, "containers", names, "err", err)
		}
	})
}

// pickGroup decides g's pick once all its attempts ended, writes it into
// the state file in one atomic write (the decision: without it, nothing
// was picked, and a restarted daemon picks again), then publishes the
// winner. A group already picked is published again (idempotent).
func (sw *swarm) pickGroup(ctx context.Context, g *attemptGroup) {
	g.pickMu.Lock()
	defer g.pickMu.Unlock()
	sw.mu.Lock()
	picked := decided(g.set.Pick)
	ctrs := g.ctrs
	sw.mu.Unlock()
	if !picked {
		// Attempts that ended together may not have kept their commits
		// yet (each does after its end is folded): the pick reads every
		// tip now.
		for _, c := range ctrs {
			sw.keepAttempt(ctx, g, c)
		}
	}
	sw.mu.Lock()
	set := g.setLocked()
	sw.mu.Unlock()
	if !decided(set.Pick) {
		sw.judge(ctx, set, ctrs)
		if !sw.pickPause(ctx, PickPauseBefore) {
			return
		}
		if err := sw.writeSets(ctx, set); err != nil {
			sw.m.log.Warn("record the pick in the state file; a restarted daemon picks again", "swarm", sw.id, "taskFile", set.TaskFilePath, "err", err)
			return
		}
		sw.mu.Lock()
		g.set = set.Clone()
		sw.mu.Unlock()
		sw.pickedEvent(set)
		if !sw.pickPause(ctx, PickPauseAfter) {
			return
		}
	}
	sw.publishPick(ctx, set, ctrs, "")
}

// The places Config.PickPause holds a pick.
const (
	PickPauseBefore = "before"
	PickPauseAfter  = "after"
)

// LogPickPaused is the log message of a pick the test hook holds.
const LogPickPaused = "attempt pick paused (a test hook)"

// pickPause holds the pick at where until ctx ends, when the test hook
// says so; false: the pick goes no further.
func (sw *swarm) pickPause(ctx context.Context, where string) bool {
	if sw.m.cfg.PickPause != where {
		return true
	}
	sw.m.log.Warn(LogPickPaused, "swarm", sw.id, "where", where)
	<-ctx.Done()
	return false
}

// decided reports whether p stands: a pick of an attempt, or one by
// hand. The daemon's "none qualified" is judged again when the attempts
// end again (a rerun with resume --retry-failed).
func decided(p *state.AttemptPick) bool {
	return p != nil && (p.ContainerName != "" || p.By == state.PickByHand)
}

// judge fills set's attempts with what the pick knows of each and sets
// its pick.
func (sw *swarm) judge(ctx context.Context, set *state.AttemptSet, ctrs []*ctr) {
	cands := make([]attempts.Candidate, len(set.Attempts))
	byName := map[string]*ctr{}
	for _, c := range ctrs {
		byName[c.name] = c
	}
	tips := []string{}
	for i := range set.Attempts {
		a := &set.Attempts[i]
		c := byName[a.ContainerName]
		cands[i] = attempts.Candidate{Attempt: a.Attempt, Lines: -1}
		if c == nil {
			continue
		}
		a.Qualified = sw.qualifies(c) && (a.Tip != "" || sw.attemptPublisher() == nil)
		cands[i].Qualified = a.Qualified
		a.Cost = sw.attemptCost(c)
		cands[i].Cost = a.Cost
		if e := sw.led.container(c.name); e != nil {
			cands[i].Finished = e.UpdatedAt
		}
		if a.Tip != "" {
			tips = append(tips, a.Tip)
		}
	}
	base := sw.attemptsBase(ctx, tips)
	qualified := 0
	for i := range set.Attempts {
		a := &set.Attempts[i]
		if n, ok := sw.changedLines(ctx, base, a.Tip); ok {
			a.Lines, cands[i].Lines = &n, n
		}
		if a.Qualified {
			qualified++
		}
	}
	if qualified > 1 && sw.m.cfg.ScoreCommand != "" {
		for i := range set.Attempts {
			if a := &set.Attempts[i]; a.Qualified {
				a.Score = sw.scoreAttempt(ctx, byName[a.ContainerName], a.Tip)
				cands[i].Score = a.Score
			}
		}
	}
	idx, reason := attempts.Pick(cands)
	p := &state.AttemptPick{Reason: reason, By: state.PickByDaemon, At: time.Now().UTC()}
	if idx >= 0 {
		w := set.Attempts[idx]
		p.Attempt, p.ContainerName, p.Tip = w.Attempt, w.ContainerName, w.Tip
	}
	set.Pick = p
	sw.m.log.Info("attempt picked", "swarm", sw.id, "taskFile", set.TaskFilePath, "attempt", p.Attempt, "container", p.ContainerName, "reason", reason)
}

// pickedEvent publishes attempt-picked with the line status shows.
func (sw *swarm) pickedEvent(set *state.AttemptSet) {
	sw.m.publish(api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: set.Pick.ContainerName,
		Kind: api.EventAttemptPicked, Output: attempts.Line(set)})
}

// publishPick publishes set's picked attempt as its task file's branch
// (replace: the tip of the attempt a pick by hand replaces there), and
// lands it when land.auto says so.
func (sw *swarm) publishPick(ctx context.Context, set *state.AttemptSet, ctrs []*ctr, replace string) error {
	ap := sw.attemptPublisher()
	if ap == nil || set.Pick == nil || set.Pick.ContainerName == "" {
		return nil
	}
	var w *ctr
	for _, c := range ctrs {
		if c.name == set.Pick.ContainerName {
			w = c
		}
	}
	if w == nil {
		return fmt.Errorf("the picked attempt %s is no longer in the swarm", set.Pick.ContainerName)
	}
	log := sw.m.log.With("swarm", sw.id, "container", w.name)
	if replace == "" && set.Pick.By == state.PickByHand {
		replace = set.Pick.PreviousTip // again after a restart: the branch may still hold it
	}
	u, err := ap.PublishAs(ctx, sw.branchOf(w), set.BranchName, replace)
	if err != nil {
		sw.notePublishFailed(ctx, w, err, log)
		return err
	}
	if set.Pick.By != state.PickByHand {
		sw.autoLand(w)
	}
	sw.notePullRequest(ctx, w, u)
	return nil
}

// recoverPicks finishes, after a restart, the picks a daemon killed
// mid-way left: a group whose attempts all ended is picked now if its
// pick was not written, and its winner published again if it was.
func (sw *swarm) recoverPicks() {
	sw.mu.Lock()
	var gs []*attemptGroup
	for _, g := range sw.groups {
		gs = append(gs, g)
	}
	sw.mu.Unlock()
	for _, g := range gs {
		if len(g.ctrs) == 0 || !sw.groupEnded(g) {
			continue
		}
		sw.m.wg.Go(func() {
			for _, c := range g.ctrs {
				sw.keepAttempt(sw.m.life, g, c)
			}
			sw.pickGroup(sw.m.life, g)
		})
	}
}

// attemptCost is what c's model calls cost, from its journal's usage
// records.
func (sw *swarm) attemptCost(c *ctr) float64 {
	var sum float64
	_ = state.ScanJournal(sw.store.JournalPath(sw.sandbox(c)), func(r state.Record) error {
		if r.Usage != nil {
			sum += r.Usage.Cost
		}
		return nil
	})
	return sum
}

// attemptsBase is where a task file's attempts started: the commit their
// tips share (the checkout's HEAD's with a single tip).
func (sw *swarm) attemptsBase(ctx context.Context, tips []string) string {
	args := []string{"merge-base", "--octopus"}
	if len(tips) < 2 {
		args = []string{"merge-base", "HEAD"}
	}
	out, err := landGit.Run(ctx, sw.repo, append(args, tips...)...)
	if err != nil || len(tips) == 0 {
		return ""
	}
	return strings.TrimSpace(out)
}

// changedLines is the lines (added plus deleted) tip changed since base.
func (sw *swarm) changedLines(ctx context.Context, base, tip string) (int, bool) {
	if base == "" || tip == "" {
		return 0, false
	}
	out, err := landGit.Run(ctx, sw.repo, "diff", "--numstat", "--no-renames", base, tip)
	if err != nil {
		return 0, false
	}
	n := 0
	for _, ln := range strings.Split(out, "\n") {
		f := strings.Fields(ln)
		if len(f) < 3 {
			continue
		}
		a, _ := strconv.Atoi(f[0]) // "-" for a binary file: 0
		d, _ := strconv.Atoi(f[1])
		n += a + d
	}
	return n, true
}
