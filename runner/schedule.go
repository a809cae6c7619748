package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
	acp "github.com/coder/acp-go-sdk"
)

// storyResult is what a worker hands back to the scheduler.
type storyResult struct {
	id      string
	status  tasks.Status // Completed, Failed, or InProgress when stopped
	output  string       // progress-update output
	note    string       // short line for the task file's notes
	errText string       // for completion.errors, when failed
	prev    tasks.Status // status before the story started
	dir     string       // the story's worktree, when isolated
	// overBudget: the budget cut the story off (budgetCut)
	overBudget bool
}

// sched is one schedule call's bookkeeping.
type sched struct {
	idx       map[string]int  // story id -> index in the task file
	retry     map[string]bool // failed or in_progress at start: an earlier run's leftovers, retried once
	attempted map[string]bool
	running   map[string]bool
	blocked   map[string]bool // skipped in this run because a dependency failed
	limit     int
	// isolate: with more than one story at a time (limit: maxConcurrency,
	// at most the stories the run has to do), each story works in
	// its own git worktree and its changes are cherry-picked onto the
	// branch when it completes: concurrent agents neither see nor commit
	// each other's edits, and a failed story's changes stay off the
	// branch. One at a time, the story works in the workspace itself (the
	// path agents and verify commands expect), and a failed story's
	// changes are committed with its status for inspection.
	isolate bool
	results chan storyResult
	gate    *budgetGate // budget.go: asked before each story
}

func newSched(f *tasks.File) *sched {
	sc := &sched{idx: make(map[string]int, len(f.UserStories)), retry: map[string]bool{},
		attempted: map[string]bool{}, running: map[string]bool{}, blocked: map[string]bool{},
		limit: f.Metadata.MaxConcurrency, results: make(chan storyResult)}
	todo := 0
	for i, s := range f.UserStories {
		sc.idx[s.ID] = i
		if s.Status == tasks.Failed || s.Status == tasks.InProgress {
			sc.retry[s.ID] = true
		}
		if sc.eligible(s) {
			todo++
		}
	}
	if sc.limit <= 0 {
		sc.limit = tasks.DefaultMaxConcurrency
	}
	// No more stories run at once than the run has to do: a lone story
	// works in the workspace itself, not in a worktree made, checked out
	// and cherry-picked back for nothing.
	sc.limit = min(sc.limit, max(todo, 1))
	sc.isolate = sc.limit > 1
	return sc
}

// eligible: not running, not tried yet in this run, and pending or a
// leftover to retry.
func (sc *sched) eligible(s tasks.Story) bool {
	if sc.running[s.ID] || sc.attempted[s.ID] {
		return false
	}
	return s.Status == tasks.Pending || sc.retry[s.ID]
}

// schedule runs stories until none is left or ctx (the stop signal) ends;
// it reports whether the run was stopped. Only this goroutine touches
// r.file and git; workers only drive agents and verify.
func (r *run) schedule(ctx context.Context, be backend) (stopped bool) {
	r.reopenSkipped()
	sc := newSched(r.file)
	done := ctx.Done()
	for {
		if !stopped && ctx.Err() != nil {
			// Stopped between stories: start nothing new.
			stopped, done = true, nil
		}
		if !stopped {
			r.skipBlocked(ctx, sc)
			for _, s := range r.ready(sc.eligible, sc.blocked) {
				if len(sc.running) >= sc.limit || !r.budgetAllows(ctx, sc, s.ID) {
					break
				}
				r.startStory(ctx, be, sc, s)
			}
		}
		if len(sc.running) == 0 {
			break
		}
		select {
		case <-done:
			r.log.Info("stop requested: cancelling stories in flight", "running", len(sc.running))
			stopped, done = true, nil
		case res := <-sc.results:
			delete(sc.running, res.id)
			r.budgetEnded(sc, res.id)
			r.finish(ctx, r.budgetCut(ctx, sc, res), sc.idx, stopped)
		}
	}
	if !stopped && ctx.Err() != nil {
		stopped = true
	}
	if r.budgetStopped(sc) {
		stopped = true
	}
	if !stopped {
		// Whatever is still pending could never become ready (e.g. a cycle
		// the parser let through): say so instead of hanging or staying silent.
		for _, s := range r.file.UserStories {
			if sc.eligible(s) && s.Status == tasks.Pending {
				r.addErr("%s never became ready: its dependencies %v did not complete", s.ID, s.DependsOn)
			}
		}
	}
	return stopped
}

// reopenSkipped puts the stories an earlier run skipped behind a failed
// one back to pending (tasks.File.SkippedBehindFailure): this run retries
// the failed ones, so these may run after all. The daemon's fold of the
// run starts with them pending by the same rule; nothing is reported.
func (r *run) reopenSkipped() {
	for _, id := range r.file.SkippedBehindFailure(nil) {
		s, _ := r.file.Story(id)
		r.setStatus(id, tasks.Pending, appendNote(s.Notes, "Reopened: the failed dependency it was skipped for is retried."))
		r.log.Info("story reopened: the failed dependency it was skipped for is retried", "story", id)
	}
}

// skipBlocked skips the stories behind a failed dependency, commits that
// and says so.
func (r *run) skipBlocked(ctx context.Context, sc *sched) {
	skipped := r.propagateSkips(sc.idx, sc.eligible, sc.blocked, sc.attempted)
	if len(skipped) == 0 {
		return
	}
	ids := make([]string, len(skipped))
	for i, sk := range skipped {
		ids[i] = sk.id
	}
	r.persist(ctx, "Skip "+strings.Join(ids, ", ")+": a dependency failed", false)
	for _, sk := range skipped {
		r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: sk.id, Status: acpmsg.StorySkipped, Output: acpmsg.TruncateOutput(sk.why)})
	}
}

// startStory marks s in progress and runs it on a worker, whose result
// comes back on sc.results.
func (r *run) startStory(ctx context.Context, be backend, sc *sched, s tasks.Story) {
	sc.running[s.ID] = true
	sc.attempted[s.ID] = true
	prompt := buildPrompt(r.file, s, r.req.TaskFilePath)
	prev := s.Status
	r.setStatus(s.ID, tasks.InProgress, "")
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: acpmsg.StoryInProgress,
		Output: acpmsg.TruncateOutput(fmt.Sprintf("Started %s: %s (agent %s).", s.ID, s.Title, r.cfg.Agent))})
	r.log.Info("story started", "story", s.ID, "running", len(sc.running), "limit", sc.limit, "isolated", sc.isolate)
	dir, wtErr := r.cfg.Workspace, error(nil)
	if sc.isolate {
		dir, wtErr = r.git.addWorktree(ctx, s.ID)
	}
	go func() {
		var res storyResult
		if wtErr != nil {
			res = storyResult{id: s.ID, status: tasks.Failed,
				output:  fmt.Sprintf("%s failed before the agent started: no worktree: %v.", s.ID, wtErr),
				note:    "failed: no worktree: " + oneLine(wtErr.Error(), 300),
				errText: fmt.Sprintf("%s: worktree: %v", s.ID, wtErr)}
			if ctx.Err() != nil {
				res.status = tasks.InProgress
			}
		} else {
			res = r.work(ctx, be, s, prompt, dir)
		}
		res.prev = prev
		if sc.isolate && wtErr == nil {
			res.dir = dir
		}
		sc.results <- res
	}()
}

// ready lists eligible stories whose dependencies are all completed or
// skipped (not skipped by this run's failures), lowest priority first.
func (r *run) ready(eligible func(tasks.Story) bool, blocked map[string]bool) []tasks.Story {
	byID := map[string]tasks.Story{}
	for _, s := range r.file.UserStories {
		byID[s.ID] = s
	}
	var out []tasks.Story
	for _, s := range r.file.UserStories {
		if !eligible(s) {
			continue
		}
		ok := true
		for _, d := range s.DependsOn {
			ds := byID[d].Status
			if !(ds == tasks.Completed || (ds == tasks.Skipped && !blocked[d])) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b tasks.Story) int { return a.Priority - b.Priority })
	return out
}

// propagateSkips marks pending stories behind a failed (and not retried)
// dependency, or behind a story this run skipped for that reason, as skipped
// with a note naming the cause. It returns their ids.
func (r *run) propagateSkips(idx map[string]int, eligible func(tasks.Story) bool, blocked, attempted map[string]bool) []skip {
	f := r.file
	var out []skip
	for changed := true; changed; {
		changed = false
		for _, s := range f.UserStories {
			if s.Status != tasks.Pending || !eligible(s) {
				continue
			}
			for _, d := range s.DependsOn {
				dep := f.UserStories[idx[d]]
				var why string
				switch {
				case dep.Status == tasks.Failed && !eligible(dep):
					why = fmt.Sprintf("Skipped: dependency %s failed.", d)
				case blocked[d]:
					why = fmt.Sprintf("Skipped: dependency %s was skipped because its own dependencies failed.", d)
				default:
					continue
				}
				r.setStatus(s.ID, tasks.Skipped, appendNote(s.Notes, why))
				blocked[s.ID] = true
				attempted[s.ID] = true
				out = append(out, skip{s.ID, why})
				changed = true
				break
			}
		}
	}
	return out
}

type skip struct{ id, why string }

// gitContext is ctx, or, once the run is stopping, a short uncancelled one:
// a finished story's commit and push are worth a few seconds.
func gitContext(ctx context.Context, stopped bool) (context.Context, context.CancelFunc) {
	if stopped || ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), finalPushTimeout)
	}
	return context.WithCancel(ctx)
}

// setStatus moves a story through the task file's transition table
// (tasks.File.SetStatus), the only way the runner changes a status. A move
// the table forbids is a bug here: the story keeps its status and the run
// fails saying which move was refused, rather than write a file the spec
// does not allow.
func (r *run) setStatus(id string, to tasks.Status, notes string) {
	if err := r.file.SetStatus(id, to, notes); err != nil {
		r.fatal = true
		r.addErr("%v", err)
	}
}

// appendNote adds a dated runner line to a story's notes, keeping what the
// planner or user wrote.
func appendNote(notes, line string) string {
	line = "[aimi " + time.Now().UTC().Format("2006-01-02") + "] " + line
	if strings.TrimSpace(notes) == "" {
		return line
	}
	return strings.TrimRight(notes, "\n") + "\n" + line
}

// work drives one story: agent turn, then verify.
func (r *run) work(ctx context.Context, be backend, s tasks.Story, prompt, dir string) storyResult {
	start := time.Now()
	var o outcome
	if strings.HasPrefix(strings.TrimSpace(s.Notes), contract.VerifyOnlyNotes) {
		o = outcome{stop: acp.StopReasonEndTurn, summary: "Verify only: no agent turn."}
	} else {
		o = r.runLimited(ctx, be, s, prompt, dir)
	}
	res := storyResult{id: s.ID}
	summary := strings.TrimSpace(o.summary)
	if summary == "" {
		summary = "The agent reported nothing."
	}
	took := time.Since(start).Round(time.Second)
	switch {
	case o.err != nil && ctx.Err() != nil:
		res.status = tasks.InProgress // the stop took the agent down: stopped, not failed
	case o.err != nil:
		res.status = tasks.Failed
		res.output = fmt.Sprintf("%s failed after %s: %v. %s", s.ID, took, o.err, summary)
		res.note = "failed: " + o.err.Error()
		res.errText = fmt.Sprintf("%s: %s: %v", s.ID, acpmsg.CodeAgentCrash, o.err)
	case o.stalled != "" && ctx.Err() == nil:
		res.status = tasks.Failed
		res.output = fmt.Sprintf("%s failed after %s: %s: the agent stalled twice; %s. %s", s.ID, took, acpmsg.CodeAgentStalled, o.stalled, summary)
		res.note = "failed: the agent stalled twice: " + oneLine(o.stalled, 300)
		res.errText = fmt.Sprintf("%s: %s: %s", s.ID, acpmsg.CodeAgentStalled, oneLine(o.stalled, 400))
	case o.stop == acp.StopReasonEndTurn:
		ok, detail := r.verify(ctx, dir)
		if ok {
			res.status = tasks.Completed
			res.output = strings.TrimSpace(fmt.Sprintf("%s completed in %s. %s %s", s.ID, took, summary, detail))
			res.note = "completed: " + oneLine(summary, 400)
		} else if ctx.Err() != nil {
			res.status = tasks.InProgress
		} else {
			res.status = tasks.Failed
			res.output = fmt.Sprintf("%s failed: %s %s", s.ID, detail, summary)
			res.note = "failed: " + oneLine(detail, 400)
			res.errText = fmt.Sprintf("%s: verify failed: %s", s.ID, oneLine(detail, 300))
		}
	case o.stop == acp.StopReasonCancelled && ctx.Err() != nil:
		res.status = tasks.InProgress // stopped: stays in flight, nothing committed
	default:
		why := stopReasonText(o.stop)
		res.status = tasks.Failed
		res.output = fmt.Sprintf("%s failed: %s. %s", s.ID, why, summary)
		res.note = "failed: " + why + ". " + oneLine(summary, 300)
		res.errText = fmt.Sprintf("%s: %s", s.ID, why)
	}
	if res.status == tasks.Failed && o.limited != "" {
		res.output += " (" + o.limited + ")"
		res.note += " (" + o.limited + ")"
		res.errText += " (" + o.limited + ")"
	}
	res.output = withCost(res.output, o.cost)
	r.log.Info("story finished", "story", s.ID, "status", res.status, "stopReason", o.stop, "took", took)
	return res
}

// finish records a worker's result: task file, commit, push, progress-update.
func (r *run) finish(ctx context.Context, res storyResult, idx map[string]int, stopped bool) {
	i := idx[res.id]
	s := &r.file.UserStories[i]
	if res.overBudget {
		r.finishOverBudget(ctx, res, s, stopped)
		return
	}
	if res.dir != "" {
		gctx, cancel := gitContext(ctx, stopped)
		defer cancel()
		defer r.git.removeWorktree(gctx, res.dir)
		switch res.status {
		case tasks.Completed:
			if _, err := r.git.applyWorktree(gctx, res.dir, r.req.TaskFilePath, fmt.Sprintf("%s: %s (work)", s.ID, s.Title)); err != nil {
				res.status = tasks.Failed
				res.output = fmt.Sprintf("%s failed: the agent finished, but %v. %s", s.ID, err, res.output)
				res.note = "failed: " + oneLine(err.Error(), 300)
				res.errText = fmt.Sprintf("%s: %v", s.ID, err)
			}
		case tasks.Failed:
			res.note += " (its changes were kept off the branch)"
		}
	}
	if res.status == tasks.InProgress {
		// Stopped mid-story: nothing is written or committed for it; it is
		// put back as it was (the table's in_progress -> pending), and the
		// next run finds it as the committed file left it.
		r.setStatus(s.ID, res.prev, "")
		return
	}
	r.setStatus(s.ID, res.status, appendNote(s.Notes, res.note))
	if res.errText != "" {
		r.errs = append(r.errs, res.errText)
	}
	msg := fmt.Sprintf("%s: %s (%s)\n\n%s", s.ID, s.Title, res.status, oneLine(res.output, 1500))
	r.persist(ctx, msg, stopped)
	st := acpmsg.StoryCompleted
	if res.status == tasks.Failed {
		st = acpmsg.StoryFailed
	}
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: st, Output: acpmsg.TruncateOutput(res.output)})
}

// persist writes the task file, commits the tree and pushes the branch, so a
// crash or stop loses at most the story in flight. When the run is stopping,
// git gets a bounded, uncancelled context: a finished story's commit is worth
// the few seconds.
func (r *run) persist(ctx context.Context, msg string, stopped bool) {
	ctx, cancel := gitContext(ctx, stopped)
	defer cancel()
	if err := r.writeTaskFile(); err != nil {
		r.fatal = true
		r.addErr("write task file %s: %v", r.req.TaskFilePath, err)
		return
	}
	committed, err := r.git.commitAll(ctx, msg)
	if err != nil {
		r.fatal = true
		r.addErr("commit: %v", err)
		return
	}
	if !committed {
		return
	}
	// A failed push here is not the run's failure: the next push (at the
	// latest the run's last, which retries longer) carries this commit.
	if err := r.git.push(ctx, r.req.BranchName, min(storyPushRetry, r.cfg.PushRetry)); err != nil {
		r.log.Warn("push after a story failed; the next push carries its commit", "branch", r.req.BranchName, "err", err)
	}
}
