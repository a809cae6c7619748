package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// followLog is what follow logs to.
type followLog interface {
	Warn(string, ...any)
	Info(string, ...any)
}

// follower is one supervisor's watch of a container: its log stream, its
// exit wait, its timeout and stop request, and what it learned of how the
// container ended.
type follower struct {
	sw  *swarm
	c   *ctr
	id  string
	ctx context.Context
	log followLog

	lines        <-chan engine.Line // nil while no stream is open
	cancelStream context.CancelFunc
	exitCh       <-chan engine.Exit // nil once the exit is known
	drain        <-chan time.Time   // reopen the stream, or stop draining it after the exit
	timer        *time.Timer
	started      time.Time // what the timeout counts from
	stopCh       <-chan struct{}

	facts     exitFacts
	exited    bool
	done      bool // every line is read: decide
	stopAsked bool // Stop is called at most once
}

// follow runs a container (start: it is created and not yet started) until
// it exits, reading every line, then decides its status. When ctx ends it
// returns without deciding: Recover re-attaches.
func (sw *swarm) follow(ctx context.Context, c *ctr, log followLog, start bool) {
	f := &follower{sw: sw, c: c, id: sw.idOf(c), ctx: ctx, log: log, cancelStream: func() {}}
	defer func() { f.cancelStream() }()
	if !f.begin(start) {
		return
	}
	if f.timer != nil {
		defer f.timer.Stop()
	}
	for !f.done {
		if !f.step() {
			return
		}
	}
	f.end()
}

// begin registers the exit wait, starts the container when asked, sends
// the task-request if the journal lacks it and opens the stream; false
// when the supervisor is done already (ctx ended, or the container could
// not be started or found, which begin has decided).
func (f *follower) begin(start bool) bool {
	sw, eng := f.sw, f.sw.m.eng
	// How long each step took (measured: the engine's start is nearly all
	// of it).
	tr := newTracer(sw.m.log, "start step", "step", "container", f.c.name)
	// The exit wait is registered before the start, so no exit can slip
	// by. The stream of a container started here opens after its
	// task-request (see below); a re-attached container's opens at once.
	f.exitCh = eng.Wait(f.ctx, f.id)
	tr.mark("exit wait registered")
	claimed := f.takeClaimed(start)
	ok := !start || claimed != nil || f.start()
	// Started, refused, or already running: either way it no longer
	// holds the wave back.
	sw.leaveWave(f.c)
	if !ok {
		return false
	}
	tr.mark("started")
	if !start {
		f.open()
	}
	info, ok := f.inspect(claimed)
	if !ok {
		return false
	}
	tr.mark("inspected")
	sw.setNode(f.c, info.Node)
	if info.Node == "" && !(info.Running && info.Pid > 0) {
		sw.m.wg.Go(func() { sw.watchNode(f.ctx, f.c, f.id) })
	}
	if !start && !info.Running {
		// It exited between the listing and the wait's registration; a
		// next-exit wait would never fire. Read what is left and decide.
		f.facts.code, f.facts.oom, f.facts.exited = info.ExitCode, info.OOMKilled, true
		f.facts.engineEnded(info.Failure, info.FailureReason)
		f.exited, f.done = true, true
		f.exitCh = nil
		return true
	}
	if info.Running && info.Pid > 0 {
		pid := info.Pid
		_ = sw.led.update(f.c.name, func(sc *state.Container) { sc.ACPPID = &pid })
	}
	sw.event(f.c, api.EventContainerStarted, nil)
	if !f.deliver(start, claimed != nil, tr) {
		return false
	}
	if start {
		// The stream of a container started here opens once its work
		// began: readers of the containers started first would poll the
		// engine while it still starts the rest of the wave, and the
		// wave's last requests would wait behind the first streams'
		// opening. It reads from the journal's cursor, so no line is
		// missed; what the runner writes first is small. (Holding every
		// stream until the whole wave had its requests was tried: the
		// streams then all opened at once, as the status was read, and
		// the last container showed running later, not sooner.)
		f.open()
	}
	f.armTimeout(sw.limitFrom(f.c, info.StartedAt))
	f.stopCh, _ = sw.stopChan(f.c)
	return true
}

// takeClaimed is a claimed sandbox's view from its claim when this start
// is its first (nil otherwise): it runs already, and an exit since then
// reaches the exit wait registered before (the engine's wait looks at the
// container once registered).
func (f *follower) takeClaimed(start bool) *engine.Info {
	f.sw.mu.Lock()
	defer f.sw.mu.Unlock()
	in := f.c.claimed
	f.c.claimed = nil
	if !start {
		return nil
	}
	return in
}

// inspect is the container as the engine shows it (known: the claim's
// view); false when it is gone (decided) or ctx ended.
func (f *follower) inspect(known *engine.Info) (engine.Info, bool) {
	if known != nil {
		return *known, true
	}
	info, err := f.sw.m.eng.Inspect(f.ctx, f.id)
	if err != nil {
		if f.ctx.Err() == nil {
			f.sw.finish(f.ctx, f.c, exitFacts{missing: true})
		}
		return engine.Info{}, false
	}
	return info, true
}

// deliver sends the task-request unless it was sent before (a re-attached
// container); a started one waits for the rest of its start wave first,
// a claimed one only once its wave creates (startWave).
// A request that cannot be sent stops the container; false only when ctx
// ended.
func (f *follower) deliver(start, claimed bool, tr *tracer) bool {
	sw := f.sw
	journaled, answered := false, false
	if !start {
		journaled, answered = sw.requestState(f.c)
	}
	if !answered {
		// The rest of the start wave first (startWave).
		if start && sw.startWave().wait(f.ctx, waveMaxWait, claimed) {
			tr.mark("start wave done")
		}
		if err := sw.sendRequest(f.ctx, f.c, !journaled); err != nil {
			if f.ctx.Err() != nil {
				return false
			}
			// A runner without its task-request would wait until the
			// timeout: stop it now and say why.
			f.log.Warn("send the task-request; stopping the container", "err", err)
			f.facts.sendErr = err.Error()
			f.stop(0)
		}
		tr.mark("task-request sent and journaled")
	}
	return true
}

// limitFrom is when c's time limit counts from: the engine's start, so
// that it survives a daemon restart; but a sandbox claimed from the warm
// pool was started long before its claim (up to sandbox.warm_max_age),
// and its limit counts from the moment the state file took it in, as a
// created container's nearly does.
func (sw *swarm) limitFrom(c *ctr, started time.Time) time.Time {
	if sc := sw.led.container(c.name); sc != nil && sc.CreatedAt.After(started) {
		return sc.CreatedAt
	}
	return started
}

// armTimeout starts the container's timeout, counting from started.
func (f *follower) armTimeout(started time.Time) {
	sw := f.sw
	if started.IsZero() || started.Year() < 2 {
		started = time.Now()
	}
	f.started = started
	f.timer = time.NewTimer(max(time.Until(started.Add(sw.m.cfg.Timeout)), 0))
}

// start starts the created container; false when ctx ended or the engine
// refused (then the container is decided failed).
func (f *follower) start() bool {
	if f.ctx.Err() != nil {
		return false // shutting down: leave it created, Recover starts it
	}
	if err := f.sw.m.eng.Start(f.ctx, f.id); err != nil {
		if f.ctx.Err() == nil {
			m := errorMsg(f.sw, f.c, CodeStartFailed, fmt.Sprintf("the engine did not start the container: %v", err))
			f.sw.finishWith(f.ctx, f.c, &m, exitFacts{})
		}
		return false
	}
	return true
}

// step handles the next thing that happens to the container; false when
// ctx ended.
func (f *follower) step() bool {
	select {
	case <-f.ctx.Done():
		return false
	case ln, ok := <-f.lines:
		return f.onLine(ln, ok)
	case <-f.drain:
		f.onDrain()
	case ex := <-f.exitCh:
		return f.onExit(ex)
	case <-f.timer.C:
		if f.putOffTimeout() {
			return true
		}
		f.facts.timedOut = true
		f.log.Info("timeout reached; stopping the container", "timeout", f.sw.m.cfg.Timeout)
		f.stop(f.sw.m.cfg.StopGrace)
	case <-f.stopCh:
		f.stopCh = nil
		f.facts.stopped = true
		f.stop(f.sw.m.cfg.StopGrace)
	}
	return true
}

func (f *follower) onLine(ln engine.Line, ok bool) bool {
	if !ok {
		f.lines = nil
		if f.exited {
			f.done = true
		} else {
			f.drain = time.After(reopenDelay)
		}
		return true
	}
	if err := f.sw.handle(f.ctx, f.c, ln); err != nil {
		if f.ctx.Err() != nil {
			return false
		}
		f.log.Warn("record a line", "err", err)
	}
	return true
}

func (f *follower) onDrain() {
	f.drain = nil
	if f.exited {
		f.done = true
		return
	}
	// The stream ended while the container runs: read on from the cursor.
	if l, err := f.openStream(); err == nil {
		f.lines = l
	} else {
		f.drain = time.After(time.Second)
	}
}

func (f *follower) onExit(ex engine.Exit) bool {
	f.exitCh = nil
	if ex.Err != nil {
		// The wait broke (the engine restarted, or the container went
		// away): the engine's state says which.
		inf, err := f.sw.m.eng.Inspect(f.ctx, f.id)
		switch {
		case f.ctx.Err() != nil:
			return false
		case err != nil:
			f.facts.missing = true
		case inf.Running:
			f.exitCh = f.sw.m.eng.Wait(f.ctx, f.id)
			return true
		default:
			f.facts.code, f.facts.oom, f.facts.exited = inf.ExitCode, inf.OOMKilled, true
			f.facts.engineEnded(inf.Failure, inf.FailureReason)
		}
	} else {
		f.facts.code, f.facts.oom, f.facts.exited = ex.Code, ex.OOMKilled, true
		f.facts.engineEnded(ex.Failure, ex.FailureReason)
	}
	f.exited = true
	if f.lines == nil {
		f.done = true
	} else {
		f.drain = time.After(drainWait)
	}
	return true
}

// end reads what the stream did not deliver and decides the status.
func (f *follower) end() {
	f.cancelStream()
	if !f.facts.missing {
		if err := f.sw.readRest(f.ctx, f.c); err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.log.Warn("final read of container output", "err", err)
		}
	}
	if _, stopped := f.sw.stopChan(f.c); stopped {
		f.facts.stopped = true
	}
	f.sw.finish(f.ctx, f.c, f.facts)
}

// open opens the first log stream; when that fails, the follow loop
// tries again after reopenDelay.
func (f *follower) open() {
	if l, err := f.openStream(); err == nil {
		f.lines = l
	} else {
		f.drain = time.After(reopenDelay)
	}
}

// openStream (re)opens the log stream after the journal's cursor; one
// stream at a time.
func (f *follower) openStream() (<-chan engine.Line, error) {
	f.cancelStream()
	sctx, cancel := context.WithCancel(f.ctx)
	f.cancelStream = cancel
	return f.sw.m.eng.Lines(sctx, f.id, f.sw.led.position(f.c.name), true)
}

// stop asks the engine to stop the container, once. It runs beside the
// reading (the container's last lines still come), outlives ctx (a stop
// asked for completes), and is tracked so that Shutdown waits for it.
func (f *follower) stop(grace time.Duration) {
	if f.stopAsked {
		return
	}
	f.stopAsked = true
	ctx, eng, id, log := context.WithoutCancel(f.ctx), f.sw.m.eng, f.id, f.log
	f.sw.m.wg.Go(func() {
		// The container is checked right before the stop: only one of
		// this swarm is stopped, whatever id the state file carried. An
		// engine that cannot answer does not keep a stop from going on.
		if _, err := f.sw.verified(ctx, f.c); errors.Is(err, errForeign) {
			log.Warn("stop refused: the container is not this swarm's", "err", err)
			return
		}
		if err := eng.Stop(ctx, id, grace); err != nil {
			log.Warn("stop container", "err", err)
		}
	})
}
