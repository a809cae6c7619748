package enginelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

const (
	// maxReadFailures bounds how many consecutive failed reads (engine
	// gone, errors in the stream) Lines tolerates before giving up.
	maxReadFailures = 20
	// PollMin is the wait between two reads while output is coming; pollMax
	// bounds the wait between two reads of a quiet container when there is
	// no follow stream to ring (Sources without a Ring).
	PollMin = 20 * time.Millisecond
	pollMax = 250 * time.Millisecond
	// idleRead is how long a quiet container with a follow stream goes
	// without a read: the stream rings for every write, so this read only
	// guards against a ring the engine never sent.
	idleRead = time.Minute
	// reopenMax bounds the wait before a follow stream that ended while
	// the container runs (or has not started yet) is opened again.
	reopenMax = 2 * time.Second
	// tailStart is how many log entries a read asks for first; it grows
	// (x4) whenever that did not reach back to lines already delivered, up
	// to maxTail entries or maxTailBytes of answer, past which the log is
	// read whole from the oldest cursor instead. While a container is quiet
	// it halves, down to tailMin, so a read after a few new lines is small.
	tailStart    = 1024
	tailMin      = 64
	maxTail      = 1 << 20
	maxTailBytes = 32 << 20
	// logSkew bounds how much later a line can reach the engine's log than
	// its timestamp says: stdout and stderr are logged by two goroutines
	// that take the time and then write, so across the two streams the
	// log's order follows the timestamps only to within this.
	logSkew = 250 * time.Millisecond
)

// lineReader is one Lines call: snapshots of the engine's log, taken when
// the doorbell rings, delivering every line after `after` exactly once.
type lineReader struct {
	id  string
	log *slog.Logger
	// open returns the engine's multiplexed, timestamped log as it is now:
	// the last `tail` entries (all: tail < 0) with a time at or after since
	// (zero: any). inspect reports the container's state. ring, when set,
	// opens the doorbell: a stream that carries the container's new output
	// as it is written and ends when the container stops.
	open    func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error)
	inspect func(ctx context.Context) (engine.Info, error)
	ring    func(ctx context.Context) (io.ReadCloser, error)
	after   logcursor.Position
	out     chan<- engine.Line
	// last is the cursor of the last line delivered (or `after`) per
	// stream: a stream's lines come in order, so anything at or before it
	// was delivered already.
	last [3]logcursor.Cursor // indexed by Stream
	// seen is, per stream, a time before which every line of that stream
	// was delivered: its last cursor's time, or logSkew before the newest
	// line of a snapshot that held everything (a line that old was logged
	// before that one, so it was in the snapshot). It is what lets a quiet
	// stream be judged by a tail that holds none of its lines.
	seen      [3]time.Time
	tail      int       // entries the next snapshot asks for
	delivered int       // lines sent so far
	gate      Gate      // nil: the container is not held back
	bell      *doorbell // the open doorbell, nil while none is
	failures  int       // consecutive failed reads or inspects
	reopen    time.Duration
}

// next is what the reader does after a quiet snapshot.
type next int

const (
	readAgain next = iota
	readFinal      // the container exited: one last snapshot has all
	readStop       // ctx ended, or the reader failed for good
)

func (r *lineReader) run(ctx context.Context, follow bool) {
	r.last[engine.Stdout], r.last[engine.Stderr] = r.after.Stdout, r.after.Stderr
	r.seen[engine.Stdout], r.seen[engine.Stderr] = r.after.Stdout.Time, r.after.Stderr.Time
	if r.tail <= 0 {
		r.tail = tailStart
	}
	defer r.closeBell()
	// final: this snapshot is the last. exited: the container is known to
	// have exited, so an open line at the end is complete.
	final, exited := !follow, false
	for {
		before := r.delivered
		fs, err := r.snapshot(ctx)
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		if err == nil && r.gate != nil {
			r.gate.Pending(int64(fs.pendingBytes()))
		}
		if err == nil && final {
			// Once the container has exited, a last line without a newline
			// is a line; while it runs, it is half a line and stays unread
			// (a later reader from this cursor gets it whole).
			if exited || r.hasExited(ctx) {
				fs.flush()
			}
			return
		}
		if err == nil && r.delivered > before {
			r.failures, r.reopen = 0, 0
			if ctxutil.Sleep(ctx, PollMin) != nil {
				return
			}
			continue
		}
		if err == nil {
			r.tail = max(tailMin, r.tail/2)
		}
		switch r.quiet(ctx, err) {
		case readStop:
			return
		case readFinal:
			final, exited = true, true
		}
	}
}

func (r *lineReader) hasExited(ctx context.Context) bool {
	info, err := r.inspectGated(ctx)
	return err == nil && (info.Status == "exited" || info.Status == "dead")
}

func (r *lineReader) inspectGated(ctx context.Context) (info engine.Info, err error) {
	r.call(func() { info, err = r.inspect(ctx) })
	return info, err
}

// quiet waits, after a snapshot that delivered nothing (or failed with
// err), until the next read is due, and says which read it is.
func (r *lineReader) quiet(ctx context.Context, err error) next {
	if err == nil && r.ring != nil {
		return r.waitBell(ctx)
	}
	// Without a doorbell (or after a failed read) the engine's state says
	// whether more can come.
	info, ierr := r.inspectGated(ctx)
	if n, done := r.judge(ctx, info, errors.Join(err, ierr)); done {
		return n
	}
	if ctxutil.Sleep(ctx, r.backoff()) != nil {
		return readStop
	}
	return readAgain
}

// judge decides from an inspect (and the read before it) whether the
// reader goes on; done is false when it reads again after a wait.
func (r *lineReader) judge(ctx context.Context, info engine.Info, err error) (n next, done bool) {
	switch {
	case ctx.Err() != nil:
		return readStop, true
	case errors.Is(err, engine.ErrNotFound):
		r.fail(ctx, fmt.Errorf("read output of container %s: %w (removed; its output is gone)", r.id, engine.ErrNotFound))
		return readStop, true
	case err != nil:
		r.failures++
		r.log.Warn("reading container output failed, reading again from the cursor", "container", r.id, "err", err, "failures", r.failures)
		if r.failures >= maxReadFailures {
			r.fail(ctx, fmt.Errorf("read output of container %s: giving up after %d failed reads: %w", r.id, r.failures, err))
			return readStop, true
		}
	case info.Status == "exited" || info.Status == "dead":
		return readFinal, true
	default:
		r.failures = 0
	}
	return readAgain, false
}

// backoff is the wait before the next read of a quiet container without a
// doorbell, or after failures: growing while nothing changes.
func (r *lineReader) backoff() time.Duration {
	if r.failures > 0 {
		return min(time.Second, PollMin<<min(r.failures, 6))
	}
	r.reopen = min(max(2*r.reopen, PollMin), pollMax)
	return r.reopen
}

func (r *lineReader) fail(ctx context.Context, err error) {
	select {
	case r.out <- engine.Line{Err: err}:
	case <-ctx.Done():
	}
}
