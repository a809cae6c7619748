package container

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aimi-tools/swarm/internal/logcursor"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// testStopWhileHeldBack: a container whose output is held back (its reader's
// receiver takes no lines) is stopped. The stop, an inspect and the exit
// wait answer within bounds, and the reader reads on once its receiver
// does. The engine's exit handling takes the container's lock and waits
// for the held-back attach (engine 20.10 gave up on it after about 10 s
// here; with a log read waiting for the lock as well, a runner's burst
// wedged its container for good).
func (e *rig) testStopWhileHeldBack(t *testing.T) {
	ctx := testCtx(t)
	id := e.create(t, ctx, e.spec("heldstop", "lines:3000000;exit:0"))
	exit := e.d.Wait(ctx, id)
	lctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	lines, err := e.d.Lines(lctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Take nothing until the reader's buffer is full; then the hold-back
	// is what keeps the container from writing on.
	for len(lines) < cap(lines) {
		if ctxutil.Sleep(ctx, 10*time.Millisecond) != nil {
			t.Fatal("the reader's buffer never filled")
		}
	}
	if ctxutil.Sleep(ctx, 2*time.Second) != nil { // let the container block
		t.Fatal(ctx.Err())
	}
	// Generous: on a loaded engine a plain stop with 1 s grace took 24 s.
	const bound = 90 * time.Second
	t0 := time.Now()
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := e.d.Stop(sctx, id, 0); err != nil {
		t.Fatalf("stop of a held-back container after %s: %v", time.Since(t0), err)
	}
	info, err := e.d.Inspect(sctx, id)
	if err != nil || info.Running {
		t.Fatalf("inspect after the stop: running=%v %v", info.Running, err)
	}
	select {
	case ex := <-exit:
		if ex.Err != nil {
			t.Fatal(ex.Err)
		}
	case <-sctx.Done():
		t.Fatalf("no exit within %s of the stop", bound)
	}
	t.Logf("stopped, inspected and waited for in %s", time.Since(t0).Round(time.Millisecond))
	// The receiver takes lines again: the reader goes on, in order.
	n := 0
	for l := range lines {
		if l.Err != nil {
			t.Fatalf("after %d lines: %v", n, l.Err)
		}
		n++
		if n == 5000 {
			break
		}
	}
	if n != 5000 {
		t.Fatalf("the reader ended after %d lines", n)
	}
}

// The hold-back lets the container's output flow while an engine call of
// its reader has been outstanding for holdStall, and holds it again when
// the call answered. On a synctest bubble's clock, so the hold-back's
// timing is exact and "answered" is every goroutine blocked.
func TestHoldBackReadsOnWhileTheReaderWaitsForTheEngine(t *testing.T) {
	synctest.Test(t, testHoldBackReadsOnWhileTheReaderWaitsForTheEngine)
}

func testHoldBackReadsOnWhileTheReaderWaitsForTheEngine(t *testing.T) {
	g := newOutputGate()
	h := &holder{g: g, probe: func(context.Context) {}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), wait: time.NewTimer(0)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answered := make(chan struct{})
	answer := sync.OnceFunc(func() { close(answered) })
	defer answer() // a failed test's call ends too
	released := make(chan time.Duration, 1)
	go g.Call(func() { <-answered })
	t0 := time.Now()
	go func() {
		h.waitOpen(ctx, 10*backPressureWindow)
		released <- time.Since(t0)
	}()
	select {
	case d := <-released:
		if d < holdStall {
			t.Fatalf("released after %s, before the call had been outstanding for %s", d, holdStall)
		}
	case <-ctx.Done():
		t.Fatal("the hold-back kept the container blocked while the reader waited for the engine")
	}
	answer()
	synctest.Wait()
	if g.stalled(time.Now().Add(time.Hour)) {
		t.Fatal("stalled with no call outstanding")
	}
}

// While the reader's receiver takes nothing, the hold-back probes the
// engine after holdStall; a probe that does not answer releases it too.
func TestHoldBackProbesTheEngineWhenTheReaderStopsMoving(t *testing.T) {
	g := newOutputGate()
	probed := make(chan struct{}, 1)
	hang := make(chan struct{})
	defer close(hang)
	h := &holder{g: g, log: slog.New(slog.NewTextHandler(io.Discard, nil)), wait: time.NewTimer(0), probe: func(context.Context) {
		probed <- struct{}{}
		<-hang
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !h.waitOpen(ctx, 10*backPressureWindow) {
		t.Fatal(ctx.Err())
	}
	select {
	case <-probed:
	default:
		t.Fatal("released without a probe")
	}
}
