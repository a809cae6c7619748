package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// decide turns how a container ended into its final message when its own
// messages did not settle it. Messages win over everything: decide is only
// asked when the fold is not terminal.
func decide(facts exitFacts, stories map[string]tasks.Status) (typ acpmsg.Type, code, msg string) {
	switch {
	case facts.missing:
		return acpmsg.TypeError, CodeContainerLost, "the container is gone from the engine (removed while the daemon was not watching)"
	case facts.sendErr != "":
		return acpmsg.TypeError, CodeStartFailed, "the task-request could not be written to the container: " + facts.sendErr
	case facts.stopped:
		return acpmsg.TypeCompletion, acpmsg.CompletionStopped, "stopped on request"
	case facts.failure != "":
		return acpmsg.TypeError, facts.failure, facts.failureReason
	case facts.timedOut:
		return acpmsg.TypeError, acpmsg.CodeContainerTimeout, "the container ran past the configured timeout and was stopped"
	case facts.oom:
		return acpmsg.TypeError, acpmsg.CodeContainerOOM, fmt.Sprintf("the container exceeded its memory limit and was killed by the OOM killer (exit code %d)", facts.code)
	case facts.code != 0:
		return acpmsg.TypeError, acpmsg.CodeAgentCrash, fmt.Sprintf("the runner exited with code %d without a completion", facts.code)
	}
	unfinished := 0
	for _, s := range stories {
		if s != tasks.Completed && s != tasks.Skipped {
			unfinished++
		}
	}
	if unfinished > 0 {
		// DESIGN's table says exit 0 is completed "unless the journal says
		// otherwise": stories left unfinished say otherwise.
		return acpmsg.TypeError, acpmsg.CodeAgentCrash, fmt.Sprintf("the runner exited 0 without a completion, with %d stories unfinished", unfinished)
	}
	return acpmsg.TypeCompletion, acpmsg.CompletionCompleted, "the runner exited 0 without a completion; every story is done"
}

func errorMsg(sw *swarm, c *ctr, code, text string) acpmsg.Message {
	return acpmsg.NewMessage(acpmsg.TypeError, sw.id, sw.idOf(c), &acpmsg.ErrorPayload{Code: code, Message: acpmsg.TruncateOutput(text)})
}

// finish decides and records c's final status.
func (sw *swarm) finish(ctx context.Context, c *ctr, facts exitFacts) {
	if facts.exited && sw.m.sawOOM(sw.idOf(c)) {
		facts.oom = true
	}
	var m *acpmsg.Message
	if !sw.led.status(c.name).Terminal() {
		typ, code, text := decide(facts, sw.led.stories(c.name))
		var mm acpmsg.Message
		if typ == acpmsg.TypeCompletion {
			errs := []string{}
			if code != acpmsg.CompletionCompleted {
				errs = append(errs, text)
			}
			mm = acpmsg.NewMessage(acpmsg.TypeCompletion, sw.id, sw.idOf(c), &acpmsg.Completion{Status: code, Errors: errs})
		} else {
			mm = errorMsg(sw, c, code, text)
		}
		m = &mm
	}
	sw.finishWith(ctx, c, m, facts)
}

// publishBranch ends a finished container's git access and, when it
// completed, brings its branch into the checkout (and the pull request
// open, when configured). Local git mode only.
func (sw *swarm) publishBranch(ctx context.Context, c *ctr, log *slog.Logger) {
	if !sw.local || sw.m.cfg.Git == nil {
		return
	}
	sw.m.cfg.Git.Revoke(sw.sandbox(c))
	if sw.led.status(c.name) != state.StatusCompleted || sw.withdrawUnreceived(ctx, c, log) || sw.m.cfg.Publisher == nil {
		return
	}
	if c.attempt > 0 {
		return // kept, and published as its task file's branch once picked (attemptEnded)
	}
	u, err := sw.m.cfg.Publisher.Publish(ctx, sw.branchOf(c))
	if err != nil {
		sw.notePublishFailed(ctx, c, err, log)
		return
	}
	sw.autoLand(c)
	sw.notePullRequest(ctx, c, u)
}

// notePublishFailed journals why c's branch was not published (and where
// its work is then, which the publisher's error says) as the daemon's
// PUBLISH_FAILED note: status and logs show it, after a restart too. The
// same note is journaled once, however often a restart publishes again.
func (sw *swarm) notePublishFailed(ctx context.Context, c *ctr, err error, log *slog.Logger) {
	log.Warn("publish the branch", "branch", c.branch, "err", err)
	m := errorMsg(sw, c, acpmsg.CodePublishFailed, err.Error())
	p := m.Payload.(*acpmsg.ErrorPayload)
	sw.mu.Lock()
	seen := slices.Contains(c.errs, api.ErrorDetail{Code: p.Code, Message: p.Message})
	sw.mu.Unlock()
	if seen {
		return
	}
	if rej, err := sw.led.daemon(ctx, c.name, m); err != nil || rej != "" {
		log.Warn("could not journal the publish failure", "err", err, "rejected", rej)
		sw.mu.Lock()
		c.addError(api.ErrorDetail{Code: p.Code, Message: p.Message})
		sw.mu.Unlock()
		return
	}
	sw.noteMessage(c, lineResult{msg: &m})
	if err := sw.led.flush(ctx); err != nil && ctx.Err() == nil {
		log.Warn("flush state", "err", err)
	}
}

// withdrawUnreceived makes a completed container failed when its branch
// holds commits the git service never received (its runner claimed a
// success its pushes did not deliver): the daemon's GIT_PUSH_FAILED error,
// which the fold takes as withdrawing the completion, names them and the
// way to get them. It reports whether it did. A service that cannot tell
// changes nothing (cleanup asks again before it removes anything).
func (sw *swarm) withdrawUnreceived(ctx context.Context, c *ctr, log *slog.Logger) bool {
	commits, err := sw.m.cfg.Git.Unreceived(ctx, sw.branchOf(c))
	if err != nil || len(commits) == 0 {
		if err != nil {
			log.Info("cannot tell whether the git service has every commit of the branch", "branch", c.branch, "err", err)
		}
		return false
	}
	short := make([]string, 0, min(len(commits), 10))
	for _, s := range commits[:cap(short)] {
		short = append(short, s[:min(len(s), 12)])
	}
	text := fmt.Sprintf("the container reported completed, but its branch %s holds commit(s) the git service never received (%s); they stay in the container (cleanup keeps it): run 'aimi swarm fetch' to bring them into your checkout",
		c.branch, strings.Join(short, " "))
	m := errorMsg(sw, c, acpmsg.CodeGitPushFailed, text)
	if rej, err := sw.led.daemon(ctx, c.name, m); err != nil || rej != "" {
		log.Warn("could not record the unreceived commits", "err", err, "rejected", rej)
		return false
	}
	sw.noteMessage(c, lineResult{msg: &m})
	if err := sw.led.flush(ctx); err != nil && ctx.Err() == nil {
		log.Warn("flush state", "err", err)
	}
	log.Warn("completed container withdrawn: its branch was not received", "branch", c.branch, "commits", len(commits))
	return true
}

// notePullRequest puts the pull request the daemon opened for c's branch
// into the state file, where other aimi tools look for it: a daemon
// completion that repeats c's status with the prUrl added, which the fold
// accepts as an amendment of the completion without a prUrl.
// u nil: none was opened.
func (sw *swarm) notePullRequest(ctx context.Context, c *ctr, u *string) {
	if u == nil {
		return
	}
	url := *u
	sw.mu.Lock()
	c.prURL = u
	sw.mu.Unlock()
	log := sw.m.log.With("swarm", sw.id, "container", c.name)
	if sc := sw.led.container(c.name); sc == nil || sc.PRURL != nil {
		return // gone (cleanup), or the runner's completion carried one
	}
	m := acpmsg.NewMessage(acpmsg.TypeCompletion, sw.id, sw.idOf(c), &acpmsg.Completion{Status: acpmsg.CompletionCompleted, PRURL: &url, Errors: []string{}})
	if err := m.Validate(); err != nil {
		log.Warn("pull request URL not recorded in the state file", "url", url, "err", err)
		return
	}
	if rej, err := sw.led.daemon(ctx, c.name, m); err != nil {
		log.Warn("journal the pull request", "err", err)
		return
	} else if rej != "" {
		log.Warn("pull request not folded into the state", "reason", rej)
		return
	}
	if err := sw.led.flush(ctx); err != nil && ctx.Err() == nil {
		log.Warn("flush state", "err", err)
	}
}

// finishWith journals the daemon's final message (if any), clears acpPid,
// flushes, and does the git follow-up.
func (sw *swarm) finishWith(ctx context.Context, c *ctr, m *acpmsg.Message, facts exitFacts) {
	log := sw.m.log.With("swarm", sw.id, "container", c.name)
	sw.mu.Lock()
	if facts.exited {
		code := facts.code
		c.exitCode = &code
	}
	c.oom = facts.oom
	sw.mu.Unlock()
	if m != nil {
		if rej, err := sw.led.daemon(ctx, c.name, *m); err != nil {
			log.Warn("journal the daemon's decision", "err", err)
		} else if rej != "" {
			log.Warn("daemon decision not folded", "reason", rej)
		}
		sw.noteMessage(c, lineResult{msg: m})
	}
	_ = sw.led.update(c.name, func(sc *state.Container) { sc.ACPPID = nil })
	if err := sw.led.flush(ctx); err != nil && ctx.Err() == nil {
		log.Warn("flush state", "err", err)
	}
	if sw.m.cfg.Models != nil {
		sw.m.cfg.Models.Revoke(sw.sandbox(c))
	}
	sw.closeNet(c)
	sw.publishBranch(ctx, c, log)
	sw.event(c, api.EventContainerExited, func(e *api.Event) {
		if m != nil {
			fillMessage(e, m)
		}
		if e.StoryStatus == "" && e.Status != string(state.StatusCompleted) {
			// Which story it ended on, for whoever is told (a story
			// status beside it would change that story on the board).
			e.StoryID = c.storyAtEnd(sw.led.stories(c.name))
		}
	})
	log.Info("container finished", "status", sw.led.status(c.name), "exitCode", facts.code, "oom", facts.oom, "timedOut", facts.timedOut)
	sw.attemptEnded(ctx, c)
	sw.checkFinished()
}
