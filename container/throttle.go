package container

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aimi-tools/swarm/internal/enginelog"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

const (
	// backPressureWindow is how many bytes of output an attached container
	// may write beyond what the reader has delivered (or holds as lines
	// still open) before its writes block. It covers what the engine may
	// hold before the log has it (the log copier's 16 KiB line buffer, its
	// pipe); the engine adds its own attach pipe (1 MB) and socket buffers
	// on top. All of it stays far below what the engine's log keeps, so the
	// log never drops a line the reader has not read.
	backPressureWindow = 1 << 20
	// holdStall is how long the hold-back may keep the container blocked
	// while an engine call of its reader (or of its own probe) has not
	// answered. Past it the engine may be waiting for the hold-back itself
	// (see attachHoldBack), so the hold-back reads on freely until the call
	// answers.
	holdStall = 2 * time.Second
)

// outputGate is what the reader tells the attach that holds the container
// back: how far it has got, and whether it is waiting for the engine.
type outputGate struct {
	consumed atomic.Int64 // output bytes delivered (newline included)
	pending  atomic.Int64 // bytes of lines still open at the last read
	// readerCall and probeCall are when the reader's and the hold-back
	// probe's current engine call began (Unix ns; 0: none outstanding).
	readerCall atomic.Int64
	probeCall  atomic.Int64
	wake       chan struct{}
}

// Pending notes the bytes of lines still open at the last read.
func (g *outputGate) Pending(n int64) { g.pending.Store(n) }

func newOutputGate() *outputGate { return &outputGate{wake: make(chan struct{}, 1)} }

// Delivered notes a line of size bytes (without its newline) handed over.
func (g *outputGate) Delivered(size int) {
	g.consumed.Add(int64(size) + 1)
	g.signal()
}

func (g *outputGate) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// open reports whether output up to read bytes may flow.
func (g *outputGate) open(read int64) bool {
	return read <= g.consumed.Load()+g.pending.Load()+backPressureWindow
}

// stalled reports whether an engine call of the reader or of the probe has
// been outstanding for holdStall or more at now.
func (g *outputGate) stalled(now time.Time) bool {
	for _, c := range []*atomic.Int64{&g.readerCall, &g.probeCall} {
		if t := c.Load(); t != 0 && now.UnixNano()-t >= int64(holdStall) {
			return true
		}
	}
	return false
}

// Call runs f as an engine call of the reader: while it is outstanding for
// holdStall, the hold-back lets the container's output flow.
func (g *outputGate) Call(f func()) {
	g.readerCall.Store(time.Now().UnixNano())
	defer g.readerCall.Store(0)
	f()
}

// attachHoldBack attaches to the container's stdout and stderr and takes its
// output no faster than the follow reader delivers lines, until ctx ends or
// the container's output does. The engine copies a container's output to
// every attached stream and to its log driver in turn, and an attached
// stream that is not read fills a 1 MB pipe and then blocks the container's
// writes: that is the back-pressure. Without it, a container printing
// faster than the daemon journals runs ahead of the reader by more than the
// engine keeps, and json-file rotation drops lines silently. The bytes read
// here are discarded; the lines come from the log, with their timestamps.
// An attach that fails leaves the container unthrottled (logged).
//
// The same block can hold the engine (20.10) itself: when the container's
// process exits, the engine's exit handling takes the container's lock and
// then waits for its output copy, which waits for this attach to read.
// Every call that needs that lock (opening the log the gate waits for,
// inspect, stop) then hangs: a deadlock that only removing the container
// broke. So the hold-back never blocks while such an engine call of its
// reader has been outstanding for holdStall (reading an open log's body is
// not one: enginelog's openLog), and when it has blocked for holdStall
// without the reader moving (the reader may be waiting for its receiver,
// not the engine) it probes the engine with an inspect and treats the
// probe the same way. Reading on at such a moment loses nothing: either the
// engine is slow and the call answers soon, or the process has exited and
// all that is left to log is what the pipes hold.
//
// attachHoldBack attaches now and returns the loop that reads the attached
// stream (nil when the attach failed); the caller runs it.
func (d *Docker) attachHoldBack(ctx context.Context, id string, g *outputGate) func() {
	resp, err := bounded(ctx, engineCallTimeout, func(ctx context.Context) (types.HijackedResponse, error) {
		return d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	}, func(hr types.HijackedResponse) { hr.Close() })
	if err != nil {
		if ctx.Err() == nil {
			d.log.Debug("attach for back-pressure failed; the container's output is not held back", "container", id, "err", err)
		}
		return nil
	}
	probe := func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, engineCallTimeout)
		defer cancel()
		_, _ = d.cli.ContainerInspect(ctx, id)
	}
	return func() { holdBack(ctx, resp, g, probe, d.log.With("container", id)) }
}

func holdBack(ctx context.Context, resp types.HijackedResponse, g *outputGate, probe func(context.Context), log *slog.Logger) {
	defer resp.Close()
	stop := context.AfterFunc(ctx, resp.Close) // unblock a read
	defer stop()
	var hdr [enginelog.FrameHeaderLen]byte
	var read int64
	h := &holder{g: g, probe: probe, log: log, wait: time.NewTimer(0)}
	defer h.wait.Stop()
	for {
		if _, err := io.ReadFull(resp.Reader, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.CopyN(io.Discard, resp.Reader, n); err != nil {
			return
		}
		read += n
		if !h.waitOpen(ctx, read) {
			return
		}
	}
}

// holder is the waiting side of holdBack.
type holder struct {
	g       *outputGate
	probe   func(context.Context)
	log     *slog.Logger
	wait    *time.Timer
	probing atomic.Bool
	freed   bool // reading on freely: logged once per stall
}

// waitOpen waits until output up to read bytes may flow, or the engine may
// be waiting for the hold-back (see attachHoldBack); false when ctx ended.
func (h *holder) waitOpen(ctx context.Context, read int64) bool {
	since := time.Now()
	consumed := h.g.consumed.Load()
	for !h.g.open(read) {
		now := time.Now()
		if h.g.stalled(now) {
			if !h.freed {
				h.log.Warn("an engine call for this container has not answered; its output is not held back until it does", "after", holdStall)
				h.freed = true
			}
			return true
		}
		if c := h.g.consumed.Load(); c != consumed {
			since, consumed = now, c
		}
		if now.Sub(since) >= holdStall && h.probing.CompareAndSwap(false, true) {
			go func() {
				defer h.probing.Store(false)
				h.g.probeCall.Store(time.Now().UnixNano())
				defer h.g.probeCall.Store(0)
				h.probe(ctx)
			}()
			since = now
		}
		// The reader's snapshots note open lines, not deliveries: look
		// again at least as often as they come.
		h.wait.Reset(enginelog.PollMin)
		select {
		case <-ctx.Done():
			return false
		case <-h.g.wake:
		case <-h.wait.C:
		}
	}
	h.freed = false
	return true
}
