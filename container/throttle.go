package container

import (
	"context"
	"encoding/binary"
	"io"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// backPressureWindow is how many bytes of output an attached container may
// write beyond what the reader has delivered (or holds as lines still open)
// before its writes block. It covers what the engine may hold before the
// log has it (the log copier's 16 KiB line buffer, its pipe); the engine
// adds its own attach pipe (1 MB) and socket buffers on top. All of it
// stays far below what the engine's log keeps, so the log never drops a
// line the reader has not read.
const backPressureWindow = 1 << 20

// outputGate is what the reader tells the attach that holds the container
// back: how far it has got.
type outputGate struct {
	consumed atomic.Int64 // output bytes delivered (newline included)
	pending  atomic.Int64 // bytes of lines still open at the last read
	wake     chan struct{}
}

func newOutputGate() *outputGate { return &outputGate{wake: make(chan struct{}, 1)} }

// delivered notes a line of size bytes (without its newline) handed over.
func (g *outputGate) delivered(size int) {
	g.consumed.Add(int64(size) + 1)
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// open reports whether output up to read bytes may flow.
func (g *outputGate) open(read int64) bool {
	return read <= g.consumed.Load()+g.pending.Load()+backPressureWindow
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
// attachHoldBack attaches now and returns the loop that reads the attached
// stream (nil when the attach failed); the caller runs it.
func (d *Docker) attachHoldBack(ctx context.Context, id string, g *outputGate) func() {
	resp, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Debug("attach for back-pressure failed; the container's output is not held back", "container", id, "err", err)
		}
		return nil
	}
	return func() { holdBack(ctx, resp, g) }
}

func holdBack(ctx context.Context, resp types.HijackedResponse, g *outputGate) {
	defer resp.Close()
	stop := context.AfterFunc(ctx, resp.Close) // unblock a read
	defer stop()
	var hdr [frameHeaderLen]byte
	var read int64
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		if _, err := io.ReadFull(resp.Reader, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.CopyN(io.Discard, resp.Reader, n); err != nil {
			return
		}
		read += n
		for !g.open(read) {
			// The reader's snapshots note open lines, not deliveries:
			// look again at least as often as they come.
			wait.Reset(pollMin)
			select {
			case <-ctx.Done():
				return
			case <-g.wake:
			case <-wait.C:
			}
		}
	}
}
