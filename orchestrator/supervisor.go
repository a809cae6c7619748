package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// Error codes the daemon decides beyond the spec's standard ones.
const (
	// CodeContainerLost: the state file says pending or running but the
	// engine has no such container (a zombie entry).
	CodeContainerLost = "CONTAINER_LOST"
	// CodeStartFailed: the engine refused to start the container.
	CodeStartFailed = "CONTAINER_START_FAILED"
)

// supMode is where a supervisor begins.
type supMode int

const (
	modeFresh  supMode = iota // created, never started: wait for a slot, start
	modeAttach                // running: re-attach, read on from the cursor
	modeFinish                // exited while nobody watched: catch up, decide
	modeSettle                // terminal, branch not published: wait for the exit, publish
)

// Timing of the read loop.
const (
	// drainWait bounds how long the follow stream may go on after the exit
	// was seen; a final non-follow read from the cursor catches the rest.
	drainWait = 5 * time.Second
	// reopenDelay spaces re-opening a log stream that ended while the
	// container still ran (engine hiccup, or a stream opened before start
	// on an engine that ends those at once).
	reopenDelay = 100 * time.Millisecond
)

// launch starts c's supervisor unless one runs; it returns its done channel
// (nil when the Manager is shutting down).
func (sw *swarm) launch(c *ctr, mode supMode) chan struct{} {
	m := sw.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing || m.life.Err() != nil {
		return nil
	}
	sw.mu.Lock()
	if c.done != nil {
		select {
		case <-c.done:
		default:
			d := c.done
			sw.mu.Unlock()
			return d
		}
	}
	done := make(chan struct{})
	c.done = done
	if c.stopCh == nil {
		c.stopCh = make(chan struct{})
	}
	sw.mu.Unlock()
	// Slots are taken here, synchronously, so they go in launch order and
	// re-attached containers count before any queued one is granted.
	var tk *ticket
	switch mode {
	case modeFresh:
		tk = sw.slots.enqueue()
	case modeAttach:
		sw.slots.take()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(done)
		sw.supervise(m.life, c, mode, tk)
	}()
	return done
}

// exitFacts is what the engine says about how a container ended.
type exitFacts struct {
	code     int
	oom      bool
	timedOut bool
	stopped  bool   // stop was requested
	missing  bool   // the container is gone
	exited   bool   // code and oom are known
	sendErr  string // the task-request could not be written
	// failure and failureReason: the engine ended the sandbox from outside
	// (a cluster node lost: container.CodeNodeLost).
	failure, failureReason string
}

// engineEnded copies an engine's Failure into the facts.
func (f *exitFacts) engineEnded(code, reason string) { f.failure, f.failureReason = code, reason }

// supervise runs one container from where mode says to its final status.
// When ctx ends (Shutdown or the daemon dying) it returns without deciding
// anything: the container keeps running and Recover picks it up.
func (sw *swarm) supervise(ctx context.Context, c *ctr, mode supMode, tk *ticket) {
	log := sw.m.log.With("swarm", sw.id, "container", c.name)
	switch mode {
	case modeFresh:
		if !sw.acquire(ctx, c, tk) {
			if ctx.Err() == nil {
				sw.finish(ctx, c, exitFacts{stopped: true})
			}
			return
		}
		defer sw.slots.release()
		if sw.takeFresh(c) {
			// Created by this Manager a moment ago and never started:
			// no need to ask the engine.
			sw.follow(ctx, c, log, true)
			return
		}
		info, err := sw.m.eng.Inspect(ctx, sw.idOf(c))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			sw.finish(ctx, c, exitFacts{missing: true})
			return
		case info.Running:
			sw.follow(ctx, c, log, false)
			return
		case !info.StartedAt.IsZero() && info.StartedAt.Year() > 1:
			sw.catchUp(ctx, c, log, info)
			return
		}
		sw.follow(ctx, c, log, true)
	case modeAttach:
		// Already running: it holds a slot (taken in launch) whether or
		// not one was free.
		defer sw.slots.release()
		sw.follow(ctx, c, log, false)
	case modeFinish:
		info, err := sw.m.eng.Inspect(ctx, sw.idOf(c))
		if err != nil {
			if ctx.Err() == nil {
				sw.finish(ctx, c, exitFacts{missing: true})
			}
			return
		}
		sw.catchUp(ctx, c, log, info)
	case modeSettle:
		sw.settle(ctx, c, log)
	}
}

// settle does the git follow-up for a container that was terminal when the
// Manager adopted it but whose branch never reached the checkout: the
// daemon died between the container's completion and the publish. It waits
// for the container's process to exit, as finishWith would have, then
// publishes.
func (sw *swarm) settle(ctx context.Context, c *ctr, log *slog.Logger) {
	id := sw.idOf(c)
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	exitCh := sw.m.eng.Wait(wctx, id) // before Inspect: an exit in between is not missed
	info, err := sw.m.eng.Inspect(ctx, id)
	if ctx.Err() != nil {
		return
	}
	if err == nil && info.Running {
		select {
		case ex := <-exitCh:
			if ex.Err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("waiting for the container's exit before publishing failed; publishing anyway", "err", ex.Err)
				break
			}
			code := ex.Code
			sw.mu.Lock()
			c.exitCode, c.oom = &code, ex.OOMKilled
			sw.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
	log.Info("publishing the branch of a container that finished while the daemon was down", "branch", c.branch)
	sw.publishBranch(ctx, c, log)
	sw.event(c, api.EventContainerExited, nil)
}

// takeFresh reports (once) whether c was created by this Manager and not
// handed to a supervisor since.
func (sw *swarm) takeFresh(c *ctr) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	f := c.fresh
	c.fresh = false
	return f
}

func (sw *swarm) idOf(c *ctr) string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return c.id
}

func (sw *swarm) stopChan(c *ctr) (<-chan struct{}, bool) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return c.stopCh, c.stopReq
}

// acquire waits for a run slot; false when stopped or ctx ended first.
func (sw *swarm) acquire(ctx context.Context, c *ctr, tk *ticket) bool {
	stopCh, _ := sw.stopChan(c)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stopCh:
			cancel()
		case <-actx.Done():
		}
	}()
	if !sw.slots.wait(actx, tk) {
		return false
	}
	if _, stopped := sw.stopChan(c); stopped {
		sw.slots.release()
		return false
	}
	return true
}

// catchUp reads what a container printed after the journal's cursor, when it
// already exited, and decides its status.
func (sw *swarm) catchUp(ctx context.Context, c *ctr, log interface{ Warn(string, ...any) }, info container.Info) {
	if err := sw.readRest(ctx, c); err != nil {
		if ctx.Err() != nil {
			return
		}
		log.Warn("catch up on container output", "err", err)
	}
	_, stopped := sw.stopChan(c)
	sw.setNode(c, info.Node)
	sw.finish(ctx, c, exitFacts{code: info.ExitCode, oom: info.OOMKilled, stopped: stopped, exited: true, failure: info.Failure, failureReason: info.FailureReason})
}

// readRest reads the container's lines after the cursor without following.
func (sw *swarm) readRest(ctx context.Context, c *ctr) error {
	lines, err := sw.m.eng.Lines(ctx, sw.idOf(c), sw.led.position(c.name), false)
	if err != nil {
		return err
	}
	for ln := range lines {
		if err := sw.handle(ctx, c, ln); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// handle journals and folds one line.
func (sw *swarm) handle(ctx context.Context, c *ctr, ln container.Line) error {
	if ln.Err != nil && ln.Cursor.IsZero() {
		// The stream itself failed (its last value): not a line of the
		// container. The caller re-opens from the cursor or decides.
		sw.m.log.Warn("container output stream failed", "container", c.name, "err", ln.Err)
		return nil
	}
	res, err := sw.led.line(ctx, c.name, ln)
	if err != nil {
		return err
	}
	if res.msg == nil && res.invalid == "" {
		// A stderr line: the runner's log, journaled; nothing to fold or show.
		return nil
	}
	sw.noteMessage(c, res)
	switch {
	case res.invalid != "":
		sw.event(c, api.EventLineRejected, func(e *api.Event) { e.Output = res.invalid })
	case res.rejected != "":
		sw.event(c, api.EventLineRejected, func(e *api.Event) { e.Output = res.rejected; e.MessageType = string(res.msg.Type) })
		if res.code != "" {
			sw.failRejected(ctx, c, res)
		}
	default:
		// Per line: the status comes from the message, not from a
		// snapshot of the whole swarm.
		e := api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: c.name, Kind: api.EventProgress, Status: statusAfter(res.msg)}
		fillMessage(&e, res.msg)
		sw.m.publish(e)
	}
	return nil
}

// statusAfter is the container status a folded message leaves.
func statusAfter(m *acpmsg.Message) string {
	switch p := m.Payload.(type) {
	case *acpmsg.Completion:
		return p.Status
	case *acpmsg.ErrorPayload:
		return string(state.StatusFailed)
	}
	return string(state.StatusRunning)
}

func fillMessage(e *api.Event, m *acpmsg.Message) {
	e.MessageType = string(m.Type)
	switch p := m.Payload.(type) {
	case *acpmsg.ProgressUpdate:
		e.StoryID, e.StoryStatus, e.Output = p.StoryID, p.Status, p.Output
	case *acpmsg.ErrorPayload:
		e.Code, e.Output = p.Code, p.Message
	case *acpmsg.Completion:
		e.StoryStatus = p.Status
	}
}

// follow runs a container (start: it is created and not yet started) until
// it exits, reading every line, then decides its status.
func (sw *swarm) follow(ctx context.Context, c *ctr, log interface {
	Warn(string, ...any)
	Info(string, ...any)
}, start bool) {
	eng := sw.m.eng
	id := sw.idOf(c)
	// One stream at a time; reopened (after the cursor) if it ends while
	// the container runs.
	var streamCancel context.CancelFunc = func() {}
	defer func() { streamCancel() }()
	openStream := func(cur logcursor.Position) (<-chan container.Line, error) {
		streamCancel()
		var sctx context.Context
		sctx, streamCancel = context.WithCancel(ctx)
		return eng.Lines(sctx, id, cur, true)
	}
	// The stream is opened and the wait registered before the start, so no
	// line and no exit can slip by.
	lines, lerr := openStream(sw.led.position(c.name))
	if lerr != nil {
		lines = nil
	}
	exitCh := eng.Wait(ctx, id)
	if start {
		if ctx.Err() != nil {
			return // shutting down: leave it created, Recover starts it
		}
		if err := eng.Start(ctx, id); err != nil {
			if ctx.Err() != nil {
				return
			}
			m := errorMsg(sw, c, CodeStartFailed, fmt.Sprintf("the engine did not start the container: %v", err))
			sw.finishWith(ctx, c, &m, exitFacts{})
			return
		}
	}
	info, err := eng.Inspect(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		sw.finish(ctx, c, exitFacts{missing: true})
		return
	}
	sw.setNode(c, info.Node)
	if info.Node == "" && !(info.Running && info.Pid > 0) {
		go sw.watchNode(ctx, c, id)
	}
	var facts exitFacts
	exited := false
	if !start && !info.Running {
		// It exited between the listing and the wait's registration; a
		// next-exit wait would never fire.
		facts.code, facts.oom, facts.exited, exited = info.ExitCode, info.OOMKilled, true, true
		facts.engineEnded(info.Failure, info.FailureReason)
		exitCh = nil
	}
	if info.Running && info.Pid > 0 {
		pid := info.Pid
		_ = sw.led.update(c.name, func(sc *state.Container) { sc.ACPPID = &pid })
	}
	if !exited {
		sw.event(c, api.EventContainerStarted, nil)
	}
	stopOnce := false // Stop is called at most once
	if exited {
		// Nothing to send to or watch: read what is left and decide.
	} else if start || !sw.sentRequest(c) {
		if err := sw.sendRequest(ctx, c); err != nil {
			if ctx.Err() != nil {
				return
			}
			// A runner without its task-request would wait until the
			// timeout: stop it now and say why.
			log.Warn("send the task-request; stopping the container", "err", err)
			facts.sendErr = err.Error()
			stopOnce = true
			go func() { _ = eng.Stop(context.WithoutCancel(ctx), id, 0) }()
		}
	}
	// The timeout counts from the engine's start time, so it survives a
	// daemon restart.
	started := info.StartedAt
	if started.IsZero() || started.Year() < 2 {
		started = time.Now()
	}
	timer := time.NewTimer(max(time.Until(started.Add(sw.m.cfg.Timeout)), 0))
	defer timer.Stop()
	stopCh, _ := sw.stopChan(c)

	var drain <-chan time.Time
	stopNow := func() {
		if stopOnce {
			return
		}
		stopOnce = true
		go func() {
			if err := eng.Stop(context.WithoutCancel(ctx), id, sw.m.cfg.StopGrace); err != nil {
				log.Warn("stop container", "err", err)
			}
		}()
	}
	if lines == nil {
		drain = time.After(reopenDelay) // reopen soon
	}
	if exited {
		lines, drain = nil, nil
		goto done
	}
loop:
	for {
		select {
		case <-ctx.Done():
			return
		case ln, ok := <-lines:
			if !ok {
				lines = nil
				if exited {
					break loop
				}
				drain = time.After(reopenDelay)
				continue
			}
			if err := sw.handle(ctx, c, ln); err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("record a line", "err", err)
			}
		case <-drain:
			drain = nil
			if exited {
				break loop
			}
			// The stream ended while the container runs: read on from the
			// cursor.
			if l, err := openStream(sw.led.position(c.name)); err == nil {
				lines = l
			} else {
				drain = time.After(time.Second)
			}
		case ex := <-exitCh:
			exitCh = nil
			if ex.Err != nil {
				// The wait broke (the engine restarted, or the container
				// went away): the engine's state says which.
				inf, err := eng.Inspect(ctx, id)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					facts.missing = true
				case inf.Running:
					exitCh = eng.Wait(ctx, id)
					continue
				default:
					facts.code, facts.oom, facts.exited = inf.ExitCode, inf.OOMKilled, true
					facts.engineEnded(inf.Failure, inf.FailureReason)
				}
			} else {
				facts.code, facts.oom, facts.exited = ex.Code, ex.OOMKilled, true
				facts.engineEnded(ex.Failure, ex.FailureReason)
			}
			exited = true
			if lines == nil {
				break loop
			}
			drain = time.After(drainWait)
		case <-timer.C:
			facts.timedOut = true
			log.Info("timeout reached; stopping the container", "timeout", sw.m.cfg.Timeout)
			stopNow()
		case <-stopCh:
			stopCh = nil
			facts.stopped = true
			stopNow()
		}
	}
done:
	streamCancel()
	if !facts.missing {
		if err := sw.readRest(ctx, c); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("final read of container output", "err", err)
		}
	}
	if _, stopped := sw.stopChan(c); stopped {
		facts.stopped = true
	}
	sw.finish(ctx, c, facts)
}

// sentRequest reports whether the journal has the task-request.
func (sw *swarm) sentRequest(c *ctr) bool {
	recs, err := state.ReadJournal(sw.store.JournalPath(sw.id, c.name))
	if err != nil {
		return false
	}
	for _, r := range recs {
		if r.Stream == state.StreamDaemon && r.Type == string(acpmsg.TypeTaskRequest) {
			return true
		}
	}
	return false
}

// sendRequest writes the task-request to stdin, then journals it. In this
// order a crash in between means "not journaled" and the re-attach writes
// it again; the runner reads only its first line, so a second copy is
// harmless, while a lost one would leave it waiting forever.
func (sw *swarm) sendRequest(ctx context.Context, c *ctr) error {
	m := sw.taskRequest(c)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("the task-request for %s is invalid: %w", c.name, err)
	}
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := sw.m.eng.WriteStdin(ctx, sw.idOf(c), append(line, '\n')); err != nil {
		return fmt.Errorf("write the task-request to %s: %w", c.name, err)
	}
	if _, err := sw.led.daemon(ctx, c.name, m); err != nil {
		return fmt.Errorf("journal the task-request: %w", err)
	}
	return nil
}

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
	sw.m.cfg.Git.Revoke(c.name)
	if sw.led.status(c.name) != state.StatusCompleted || sw.m.cfg.Publisher == nil {
		return
	}
	u, err := sw.m.cfg.Publisher.Publish(ctx, sw.repo, c.branch, c.name)
	if err != nil {
		log.Warn("publish the branch", "branch", c.branch, "err", err)
		sw.mu.Lock()
		c.errs = append(c.errs, api.ErrorDetail{Code: "PUBLISH_FAILED", Message: err.Error()})
		sw.mu.Unlock()
		return
	}
	if u != nil {
		sw.mu.Lock()
		c.prURL = u
		sw.mu.Unlock()
		sw.notePullRequest(ctx, c, *u)
	}
}

// notePullRequest puts the pull request the daemon opened for c's branch
// into the state file, where other aimi tools look for it: a daemon
// completion that repeats c's status with the prUrl added, which the fold
// accepts as an amendment of the completion without a prUrl.
func (sw *swarm) notePullRequest(ctx context.Context, c *ctr, url string) {
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
	sw.publishBranch(ctx, c, log)
	sw.event(c, api.EventContainerExited, func(e *api.Event) {
		if m != nil {
			fillMessage(e, m)
		}
	})
	log.Info("container finished", "status", sw.led.status(c.name), "exitCode", facts.code, "oom", facts.oom, "timedOut", facts.timedOut)
	sw.checkFinished()
}
