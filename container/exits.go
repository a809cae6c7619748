package container

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/internal/enginelog"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
)

// exitWatch reports the exits of every container a Docker waits for from
// one engine event stream, instead of one ContainerWait connection per
// container: each such wait held an HTTP connection with its two transport
// goroutines and a waiting goroutine for the container's whole life, the
// largest part of an idle daemon's per-container cost.
//
// The stream (GET /events: type container, events die and destroy, the
// sandbox marker and the owner labels every container Create makes
// carries) is opened when the first waiter registers and closed when the
// last one is gone, so a daemon with nothing to wait for holds nothing.
// A waiter is in the map before Wait returns, and the stream is asked for
// with Since set to when it was opened (or, after a break, to the last
// event it delivered), so the engine replays what happened between the
// request and its subscription: an exit right after Start is never missed,
// whether or not the engine has answered the stream's headers yet.
//
// On die the waiters of the container are taken out of the map, the
// container is inspected once for OOMKilled (the event carries only the
// exit code), and they get the exit. On destroy they get ErrNotFound. When
// the stream breaks (the engine restarted, the connection dropped) it is
// asked for again, from the last event's time, and every waited container
// is inspected: an exited one's waiters get its exit, a removed one's
// ErrNotFound, a created or running one's keep waiting. Each Wait also
// inspects its container once after registering, in a goroutine of its
// own that ends with the inspection: a container that is already gone, or
// has already exited (one adopted from a previous daemon may exit between
// the caller's listing and the wait), is answered at once, and one without
// the labels the stream selects (not made by Create) is waited for with a
// ContainerWait of its own. A waiter whose ctx ends gets ctx's error
// (context.AfterFunc: no goroutine waits for it).
type exitWatch struct {
	d *Docker
	// mu guards waiters, stop and closed, and each waiter's done: a
	// waiter gets exactly one Exit, from whichever of the stream, the
	// inspections and its ctx answers first.
	mu      sync.Mutex
	waiters map[string][]*waiter
	stop    context.CancelFunc // ends the current stream; nil while none runs
	closed  bool
}

// waiter is one Wait's registration.
type waiter struct {
	id      string
	out     chan engine.Exit // buffered: finish never blocks
	done    bool
	stopCtx func() bool // unregisters the ctx callback
}

// Wait reports the container's exit on the returned channel (one value,
// then closed). Call it before Start: the registration is effective when
// Wait returns, so an exit right after start is not missed. A container
// that has already exited reports that exit (the daemon never restarts
// one); one removed while waited for reports ErrNotFound. If the event
// stream breaks, every waited container is inspected: an exited one's
// result comes from the inspection, a running one is waited on again. See
// exitWatch.
func (d *Docker) Wait(ctx context.Context, id string) <-chan engine.Exit {
	x := d.exits
	w := &waiter{id: id, out: make(chan engine.Exit, 1)}
	if !x.add(w) {
		x.finish(w, engine.Exit{Err: fmt.Errorf("wait for container %s: %w: the engine client is closed", id, engine.ErrEngineUnavailable)})
		return w.out
	}
	stop := context.AfterFunc(ctx, func() {
		x.finish(w, engine.Exit{Err: fmt.Errorf("wait for container %s: %w", id, ctx.Err())})
	})
	x.mu.Lock()
	if w.done {
		x.mu.Unlock()
		stop()
		return w.out
	}
	w.stopCtx = stop
	x.mu.Unlock()
	go x.check(ctx, w)
	return w.out
}

func newExitWatch(d *Docker) *exitWatch {
	return &exitWatch{d: d, waiters: map[string][]*waiter{}}
}

// add registers w and makes sure a stream runs; false once closed.
func (x *exitWatch) add(w *waiter) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	x.waiters[w.id] = append(x.waiters[w.id], w)
	if x.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		x.stop = cancel
		go x.run(ctx, time.Now())
	}
	return true
}

// finish gives w its exit unless it has one, and closes the stream when no
// waiter is left.
func (x *exitWatch) finish(w *waiter, ex engine.Exit) {
	x.mu.Lock()
	if w.done {
		x.mu.Unlock()
		return
	}
	w.done = true
	x.remove(w)
	w.out <- ex
	close(w.out)
	stop := w.stopCtx
	x.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// remove takes w out of the map, closing the stream when it was the last
// waiter. x.mu is held.
func (x *exitWatch) remove(w *waiter) {
	ws := x.waiters[w.id]
	for i, o := range ws {
		if o == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(x.waiters, w.id)
	} else {
		x.waiters[w.id] = ws
	}
	x.idle()
}

// take removes and returns the waiters of id. x.mu is held.
func (x *exitWatch) take(id string) []*waiter {
	ws := x.waiters[id]
	delete(x.waiters, id)
	x.idle()
	return ws
}

// idle closes the stream when nobody waits. x.mu is held.
func (x *exitWatch) idle() {
	if len(x.waiters) == 0 && x.stop != nil {
		x.stop()
		x.stop = nil
	}
}

// settle gives every waiter of id the exit.
func (x *exitWatch) settle(id string, ex engine.Exit) {
	x.mu.Lock()
	ws := x.take(id)
	x.mu.Unlock()
	for _, w := range ws {
		x.finish(w, ex)
	}
}

// close ends the stream; waiters get ErrEngineUnavailable.
func (x *exitWatch) close() {
	x.mu.Lock()
	x.closed = true
	var all []*waiter
	for id := range x.waiters {
		all = append(all, x.take(id)...)
	}
	x.mu.Unlock()
	for _, w := range all {
		x.finish(w, engine.Exit{Err: fmt.Errorf("wait for container %s: %w: the engine client was closed", w.id, engine.ErrEngineUnavailable)})
	}
}

// streaming reports whether a stream runs (for tests).
func (x *exitWatch) streaming() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stop != nil
}

// exitFilters select the events of the containers this Docker made: the
// sandbox marker engineConfig adds and the owner labels (WithOwner).
func (d *Docker) exitFilters() map[string]string {
	return d.ownerOf(nil)
}

// run keeps a stream open until ctx ends, from since; after a break it
// asks again from the last event's time and inspects every waited
// container.
func (x *exitWatch) run(ctx context.Context, since time.Time) {
	backoff := 100 * time.Millisecond
	for reopened := false; ; reopened = true {
		opened := time.Now()
		last, err := x.follow(ctx, since, reopened)
		if ctx.Err() != nil {
			return
		}
		if last.After(since) || time.Since(opened) > time.Minute {
			// The stream worked: this break starts the backoff over.
			backoff = 100 * time.Millisecond
			since = last
		}
		x.d.log.Warn("container exit events broke; asking again and inspecting every waited container", "err", err, "retryIn", backoff)
		if ctxutil.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// follow reads one stream from since until it breaks; it returns the time
// of the last event read (since when none) and why it ended. reconcile
// inspects every waited container once the stream is asked for.
func (x *exitWatch) follow(ctx context.Context, since time.Time, reconcile bool) (time.Time, error) {
	f := labelFilters(x.d.exitFilters())
	f.Add("type", string(events.ContainerEventType))
	f.Add("event", string(events.ActionDie))
	f.Add("event", string(events.ActionDestroy))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, errs := x.d.cli.Events(sctx, events.ListOptions{Filters: f, Since: enginelog.SinceParam(since)})
	if reconcile {
		// After the request: what exits after an inspection is replayed
		// from since.
		go x.reconcile(ctx)
	}
	last := since
	for {
		select {
		case m := <-msgs:
			if t := time.Unix(0, m.TimeNano); t.After(last) {
				last = t
			}
			x.handle(ctx, m)
		case err := <-errs:
			return last, err
		}
	}
}

// handle answers the waiters of the event's container.
func (x *exitWatch) handle(ctx context.Context, m events.Message) {
	id := m.Actor.ID
	x.mu.Lock()
	ws := x.take(id)
	x.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	if m.Action == events.ActionDestroy {
		for _, w := range ws {
			x.finish(w, removedWhileWaiting(id))
		}
		return
	}
	code, err := strconv.Atoi(m.Actor.Attributes["exitCode"])
	if err != nil {
		x.d.log.Warn("die event without an exit code; taking it from inspect", "container", id, "attrs", m.Actor.Attributes)
	}
	// Off the stream's goroutine: many containers ending at once (a stop
	// of the swarm) are inspected at once, as their own waits were.
	// The stream's ctx ends when these were the last waiters.
	ictx := context.WithoutCancel(ctx)
	go func() {
		ex := x.d.exitFromInspect(ictx, id, code, err == nil)
		for _, w := range ws {
			x.finish(w, ex)
		}
	}()
}

// reconcile inspects every waited container after the stream broke. It
// gives up at the first inspection the engine does not answer (it is
// still down): the next stream asked for reconciles again.
func (x *exitWatch) reconcile(ctx context.Context) {
	x.mu.Lock()
	ids := make([]string, 0, len(x.waiters))
	for id := range x.waiters {
		ids = append(ids, id)
	}
	x.mu.Unlock()
	for _, id := range ids {
		ex, ended, err := x.ended(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				x.d.log.Warn("inspect of the waited containers after the exit events broke failed; trying again with the next stream", "container", id, "err", err)
			}
			return
		}
		if ended {
			x.settle(id, ex)
		}
	}
}

// ended inspects id: its exit and true when it exited or is gone, false
// while it is created or running; err when the inspect failed otherwise.
func (x *exitWatch) ended(ctx context.Context, id string) (engine.Exit, bool, error) {
	info, err := x.d.Inspect(ctx, id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return removedWhileWaiting(id), true, nil
	case err != nil:
		return engine.Exit{}, false, err
	}
	ex, ok := exited(info)
	return ex, ok, nil
}

// exited is the exit of a container inspected as exited (or dead).
func exited(info engine.Info) (engine.Exit, bool) {
	if info.Running || (info.Status != "exited" && info.Status != "dead") {
		return engine.Exit{}, false
	}
	return engine.Exit{Code: info.ExitCode, OOMKilled: info.OOMKilled}, true
}

// check inspects w's container once after its registration (see
// exitWatch): gone or exited, w gets that; without the stream's labels it
// gets a ContainerWait of its own.
func (x *exitWatch) check(ctx context.Context, w *waiter) {
	info, err := x.d.Inspect(ctx, w.id)
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, engine.ErrNotFound):
		x.finish(w, removedWhileWaiting(w.id))
		return
	case err != nil:
		x.d.log.Warn("inspect of a container just waited for failed; its exit comes from the event stream", "container", w.id, "err", err)
		return
	}
	if ex, ok := exited(info); ok {
		x.finish(w, ex)
	} else if contract.CheckLabels(info.Labels, x.d.exitFilters()) != nil {
		x.alone(ctx, w, info.Running)
	}
}

// alone waits for a container the stream does not select with a
// ContainerWait of its own. A created one is waited for its next exit; if
// it is started and exits before that wait registers, the wait ends only
// when the container is removed: containers Create made never come here.
func (x *exitWatch) alone(ctx context.Context, w *waiter, running bool) {
	x.mu.Lock()
	if w.done {
		x.mu.Unlock()
		return
	}
	x.remove(w)
	x.mu.Unlock()
	x.d.log.Warn("waited container lacks the labels the exit event stream selects; waiting for it alone", "container", w.id, "labels", x.d.exitFilters())
	cond := container.WaitConditionNextExit
	if running {
		// not-running also returns at once if it exits before the wait
		// registers.
		cond = container.WaitConditionNotRunning
	}
	resC, errC := x.d.cli.ContainerWait(ctx, w.id, cond)
	x.finish(w, x.d.wait(ctx, w.id, resC, errC))
}

func removedWhileWaiting(id string) engine.Exit {
	return engine.Exit{Err: fmt.Errorf("wait for container %s: %w (removed while waiting)", id, engine.ErrNotFound)}
}
