package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

const (
	// maxReadFailures bounds how many consecutive failed reads (engine
	// gone, errors in the stream) Lines tolerates before giving up.
	maxReadFailures = 20
	// pollMin is the wait between two reads while output is coming; pollMax
	// bounds the wait between two reads of a quiet container when there is
	// no follow stream to ring (ReadLines' sources without one).
	pollMin = 20 * time.Millisecond
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

// Lines streams the container's stdout and stderr as lines with the
// engine's timestamps, starting strictly after the position `after` (on
// each stream after its own cursor; the zero Position: from the
// beginning). With follow, it keeps reading until the container has exited
// and its output is drained (or ctx is done); it can be called before Start
// and misses nothing. Without follow it returns what is there now (an
// unterminated last line of a running container is held back until it
// ends). The channel is closed at the end; to stop early, cancel ctx (an
// abandoned channel blocks the reader goroutine). See Line for how errors
// are reported. Lines longer than MaxLineBytes are reported and skipped.
//
// This reader is the one layer that drops repeated lines, so its callers
// journal what it delivers as it comes: within one call every line is
// delivered once, however often the engine's log is re-read (a broken
// stream, a follow that ended early) or repeats a frame (see
// frameSplitter's echo rule); across calls, passing the position of the
// last line taken from each stream resumes without a repeat or a gap. It
// owns the rule because only it sees the engine's log as it is: frames,
// their timestamps and the order within each stream.
//
// While a following reader runs, the container's output is held back to
// its pace (attachHoldBack): the container's writes block rather than run
// so far ahead that the engine's log rotation drops lines nobody read.
//
// Lines are read from snapshots of the log (non-following reads), never
// from a following stream: the engine (20.10, json-file) was seen skipping
// and repeating thousands of lines of a following reader under a flood,
// with and without log rotation, while a plain read of the same log was
// whole. A snapshot asks for the log's tail, which costs the engine little
// however long the log is, and enough of it to reach back to lines already
// delivered on each stream that has new ones. What tells the reader to
// read is a following stream (the doorbell) whose bytes are discarded: it
// rings when the container writes and ends when the container stops, so a
// quiet container costs the engine no request at all but the open stream
// and a read every idleRead (see docs/output-reader.md).
//
// Lines on one stream come in order. Across stdout and stderr the order is
// the engine log's, which follows the timestamps to within the skew of the
// two goroutines that log them.
func (d *Docker) Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan engine.Line, error) {
	ictx, cancel := callCtx(ctx)
	_, err := d.cli.ContainerInspect(ictx, id)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("read output of container %s: %w", id, notFound(err))
	}
	out := make(chan engine.Line, 256)
	r := &lineReader{
		id: id, after: after, out: out, log: d.log,
		open: func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error) {
			opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: "all"}
			if tail >= 0 {
				opts.Tail = strconv.Itoa(tail)
			}
			if !since.IsZero() {
				opts.Since = EngineTime(since)
			}
			return d.openLogs(ctx, id, opts)
		},
		inspect: func(ctx context.Context) (engine.Info, error) { return d.Inspect(ctx, id) },
	}
	if follow {
		r.ring = func(ctx context.Context) (io.ReadCloser, error) {
			return d.openLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Tail: "0"})
		}
	}
	// Hold the container back to the reader's pace for as long as the
	// reader runs, and no longer: a reader that gave up must not leave the
	// container blocked. The attach is made before Lines returns, so that a
	// container started after this call is held back from its first byte
	// (attached asynchronously, a flood on a loaded machine filled and
	// rotated the log before the attach existed, and its first lines were
	// lost).
	var hold func()
	hctx, stopHold := context.WithCancel(ctx)
	if follow {
		r.gate = newOutputGate()
		hold = d.attachHoldBack(hctx, id, r.gate)
	}
	go func() {
		defer close(out)
		defer stopHold()
		if hold != nil {
			go hold()
		}
		r.run(ctx, follow)
	}()
	return out, nil
}

// openLogs opens the container's log with opts; the engine must answer
// within engineCallTimeout, the stream then lasts as long as ctx.
func (d *Docker) openLogs(ctx context.Context, id string, opts container.LogsOptions) (io.ReadCloser, error) {
	sctx, answered, stop := openBounded(ctx)
	rc, err := d.cli.ContainerLogs(sctx, id, opts)
	if !answered() && err != nil {
		err = fmt.Errorf("the engine did not answer within %s: %w", engineCallTimeout, err)
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("open logs: %w", notFound(err))
	}
	return stopCloser{rc, stop}, nil
}

// stopCloser ends the stream's context when the stream is closed.
type stopCloser struct {
	io.ReadCloser
	stop context.CancelFunc
}

func (s stopCloser) Close() error {
	err := s.ReadCloser.Close()
	s.stop()
	return err
}

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
	tail      int         // entries the next snapshot asks for
	delivered int         // lines sent so far
	gate      *outputGate // nil: the container is not held back
	bell      *doorbell   // the open doorbell, nil while none is
	failures  int         // consecutive failed reads or inspects
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
			r.gate.pending.Store(int64(fs.pendingBytes()))
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
			if ctxutil.Sleep(ctx, pollMin) != nil {
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
	r.gate.call(func() { info, err = r.inspect(ctx) })
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
		return min(time.Second, pollMin<<min(r.failures, 6))
	}
	r.reopen = min(max(2*r.reopen, pollMin), pollMax)
	return r.reopen
}

func (r *lineReader) fail(ctx context.Context, err error) {
	select {
	case r.out <- engine.Line{Err: err}:
	case <-ctx.Done():
	}
}
