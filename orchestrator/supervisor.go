package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
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
	return sw.launchIn(sw.m.life, c, mode)
}

// launchIn is launch with the supervisor's context: the Manager's life, or
// a start's (see createAll), which ends with it.
func (sw *swarm) launchIn(ctx context.Context, c *ctr, mode supMode) chan struct{} {
	m := sw.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing || ctx.Err() != nil {
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
		if sw.slots.isGranted(tk) {
			// It will start right away: part of the start wave.
			leave := sw.startWave().join()
			sw.mu.Lock()
			c.leaveWave = leave
			sw.mu.Unlock()
		}
	case modeAttach:
		sw.slots.take()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(done)
		defer sw.leaveWave(c)
		sw.supervise(ctx, c, mode, tk)
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
	// (a cluster node lost: swarmmode.CodeNodeLost).
	failure, failureReason string
}

// engineEnded copies an engine's Failure into the facts.
func (f *exitFacts) engineEnded(code, reason string) { f.failure, f.failureReason = code, reason }

// supervise runs one container from where mode says to its final status.
// When ctx ends (Shutdown or the daemon dying) it returns without deciding
// anything: the container keeps running and Recover picks it up.
func (sw *swarm) supervise(ctx context.Context, c *ctr, mode supMode, tk *ticket) {
	// A container of a start in progress: nothing of it (not even its
	// name, which a clash may still change) is settled before it exists
	// and its entry is saved.
	if mode == modeFresh && !sw.awaitCreated(ctx, c) {
		sw.slots.wait(ctx, tk) // ctx ended: this gives the place in line back
		return
	}
	log := sw.m.log.With("swarm", sw.id, "container", c.name)
	if mode == modeFresh || mode == modeAttach {
		// A container that may run needs its sockets served (again,
		// after a daemon restart).
		if _, err := sw.openNet(ctx, c); err != nil {
			log.Warn("the daemon's services are not reachable from the container", "err", err)
		}
	}
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
			sw.leaveWave(c) // it ran already: nothing to start
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
func (sw *swarm) catchUp(ctx context.Context, c *ctr, log interface{ Warn(string, ...any) }, info engine.Info) {
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
func (sw *swarm) handle(ctx context.Context, c *ctr, ln engine.Line) error {
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
		sw.radarOnMessage(c, res.msg)
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

// requestState is what the journal says of a container's task-request:
// journaled, and whether a line of the container's was journaled since.
// The follower journals lines only once deliver returned, so such a line
// means the request's write went through. The scan stops at the first
// container line after the request, near the start.
func (sw *swarm) requestState(c *ctr) (journaled, answered bool) {
	_ = state.ScanJournal(sw.store.JournalPath(sw.sandbox(c)), func(r state.Record) error {
		switch {
		case r.Stream == state.StreamDaemon && r.Type == string(acpmsg.TypeTaskRequest):
			journaled = true
		case journaled && r.Stream != state.StreamDaemon:
			answered = true
			return state.StopScan
		}
		return nil
	})
	return journaled, answered
}

// sendRequest journals the task-request, then writes it to stdin
// (journal false: it is journaled already, and only written again). In
// this order a container that got its request and ended while no daemon
// ran has it in its journal like any other; a crash between the two
// leaves it journaled and unsent, and the re-attach writes it again to a
// container that has written nothing (deliver). The runner reads only
// its first request, so a second copy is harmless, while a lost one
// would leave it waiting forever.
func (sw *swarm) sendRequest(ctx context.Context, c *ctr, journal bool) error {
	m := sw.taskRequest(c)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("the task-request for %s is invalid: %w", c.name, err)
	}
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	sw.mu.Lock()
	warm := c.warm
	sw.mu.Unlock()
	note, lines := "", [][]byte{line}
	if warm {
		// The claim lines first, in the same write.
		claim, err := sw.claimOf(ctx, c)
		if err != nil {
			return err
		}
		note, lines = warmNote, append(claim, line)
	}
	if journal {
		if _, err := sw.led.daemonNote(ctx, c.name, m, note); err != nil {
			return fmt.Errorf("journal the task-request: %w", err)
		}
	}
	if err := sw.writeLines(ctx, c, lines); err != nil {
		return fmt.Errorf("write the task-request to %s: %w", c.name, err)
	}
	return nil
}
