package container

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/internal/logcursor"
)

const (
	// maxReadFailures bounds how many consecutive failed reads (engine
	// gone, errors in the stream) Lines tolerates before giving up.
	maxReadFailures = 20
	// pollMin and pollMax bound the wait between two reads of a running
	// container's log: short while output is coming, growing to pollMax
	// (the most a line waits to be read) while it is quiet.
	pollMin = 20 * time.Millisecond
	pollMax = 250 * time.Millisecond
	// tailStart is how many log entries a read asks for first; it grows
	// (x4) whenever that did not reach back to lines already delivered, up
	// to maxTail entries or maxTailBytes of answer, past which the log is
	// read whole from the oldest cursor instead. While a container is quiet
	// it halves, down to tailMin, so an idle container costs the engine a
	// small read per poll.
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
// its pace (holdBack): the container's writes block rather than run so far
// ahead that the engine's log rotation drops lines nobody read.
//
// The log is read in snapshots (non-following reads, repeated), never by
// following it: the engine (20.10, json-file) was seen skipping and
// repeating thousands of lines of a following reader under a flood, with
// and without log rotation, while a plain read of the same log was whole.
// A snapshot asks for the log's tail, which costs the engine little
// however long the log is, and enough of it to reach back to lines already
// delivered on each stream that has new ones.
//
// Lines on one stream come in order. Across stdout and stderr the order is
// the engine log's, which follows the timestamps to within the skew of the
// two goroutines that log them.
func (d *Docker) Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan Line, error) {
	if _, err := d.cli.ContainerInspect(ctx, id); err != nil {
		return nil, fmt.Errorf("read output of container %s: %w", id, notFound(err))
	}
	out := make(chan Line, 256)
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
			rc, err := d.cli.ContainerLogs(ctx, id, opts)
			if err != nil {
				return nil, fmt.Errorf("open logs: %w", notFound(err))
			}
			return rc, nil
		},
		inspect: func(ctx context.Context) (Info, error) { return d.Inspect(ctx, id) },
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

// lineReader is one Lines call: repeated snapshots of the engine's log,
// delivering every line after `after` exactly once.
type lineReader struct {
	id  string
	log *slog.Logger
	// open returns the engine's multiplexed, timestamped log as it is now:
	// the last `tail` entries (all: tail < 0) with a time at or after since
	// (zero: any). inspect reports the container's state.
	open    func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error)
	inspect func(ctx context.Context) (Info, error)
	after   logcursor.Position
	out     chan<- Line
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
}

func (r *lineReader) run(ctx context.Context, follow bool) {
	r.last[Stdout], r.last[Stderr] = r.after.Stdout, r.after.Stderr
	r.seen[Stdout], r.seen[Stderr] = r.after.Stdout.Time, r.after.Stderr.Time
	if r.tail <= 0 {
		r.tail = tailStart
	}
	failures := 0
	wait := pollMin
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
		if err == nil && r.delivered == before {
			r.tail = max(tailMin, r.tail/2)
		}
		if err == nil && r.delivered > before {
			wait = pollMin
			if sleepCtx(ctx, pollMin) != nil {
				return
			}
			continue
		}
		info, ierr := r.inspect(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(ierr, ErrNotFound):
			r.fail(ctx, fmt.Errorf("read output of container %s: %w (removed; its output is gone)", r.id, ErrNotFound))
			return
		case err != nil || ierr != nil:
			failures++
			r.log.Warn("reading container output failed, reading again from the cursor", "container", r.id, "err", errors.Join(err, ierr), "failures", failures)
			if failures >= maxReadFailures {
				r.fail(ctx, fmt.Errorf("read output of container %s: giving up after %d failed reads: %w", r.id, failures, errors.Join(err, ierr)))
				return
			}
			wait = min(time.Second, pollMin<<min(failures, 6))
		case info.Status == "exited" || info.Status == "dead":
			// One more snapshot, taken after the exit, has all there is.
			final, exited = true, true
			continue
		default:
			failures = 0
		}
		if sleepCtx(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, pollMax)
	}
}

func (r *lineReader) hasExited(ctx context.Context) bool {
	info, err := r.inspect(ctx)
	return err == nil && (info.Status == "exited" || info.Status == "dead")
}

// since is the oldest time a line not delivered yet can have: each stream's
// lines come in order, so none older than its last cursor is new.
func (r *lineReader) since() time.Time {
	a, b := r.last[Stdout].Time, r.last[Stderr].Time
	if a.IsZero() || b.IsZero() || a.Unix() <= 0 || b.Unix() <= 0 {
		return time.Time{} // the engine's Since takes no times before 1970
	}
	if b.Before(a) {
		return b
	}
	return a
}

// snapshot reads the log once and delivers every line after r.last in the
// log's order. It returns the splitter, which holds the lines still open at
// the end. The tail it asks for holds everything new when it is the whole
// log, or when for every stream it reaches back past the stream's last
// delivered line or far enough before the time the stream was seen
// through; otherwise it asks again for more, and past maxTail or
// maxTailBytes it reads the whole log from since as a stream.
func (r *lineReader) snapshot(ctx context.Context) (*frameSplitter, error) {
	since := r.since()
	for r.tail <= maxTail {
		rc, err := r.open(ctx, since, r.tail)
		if err != nil {
			return nil, err
		}
		buf, err := io.ReadAll(io.LimitReader(rc, maxTailBytes+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read logs: %w", err)
		}
		if len(buf) > maxTailBytes {
			break
		}
		n, reaches, err := r.reachesBack(buf)
		if err != nil {
			return nil, err
		}
		if n < r.tail || reaches {
			fs := r.splitter(ctx)
			err := fs.readFrom(bytes.NewReader(buf))
			r.sawThrough(fs, err)
			return fs, err
		}
		r.tail *= 4
	}
	rc, err := r.open(ctx, since, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	fs := r.splitter(ctx)
	err = fs.readFrom(rc)
	r.sawThrough(fs, err)
	return fs, err
}

// sawThrough moves each stream's seen time after a snapshot that held
// everything new.
func (r *lineReader) sawThrough(fs *frameSplitter, err error) {
	if err != nil || fs.newest == 0 {
		return
	}
	through := time.Unix(0, fs.newest).UTC().Add(-logSkew)
	for _, s := range []Stream{Stdout, Stderr} {
		if through.After(r.seen[s]) {
			r.seen[s] = through
		}
		if t := r.last[s].Time; t.After(r.seen[s]) {
			r.seen[s] = t
		}
	}
}

func (r *lineReader) splitter(ctx context.Context) *frameSplitter {
	return newFrameSplitter(MaxLineBytes, func(l Line) bool { return r.deliver(ctx, l) })
}

// reachesBack counts the frames in buf and reports whether they hold every
// line of each stream after its last cursor: the tail has an older line of
// that stream (the stream's lines are in order, so all later ones follow
// it, whole), or it starts logSkew or more before the time the stream was
// seen through (a line logged before the tail's first entry is at most
// logSkew younger than it, so it is older than that time: delivered).
func (r *lineReader) reachesBack(buf []byte) (n int, reaches bool, err error) {
	var hasOld [3]bool
	var first time.Time
	for len(buf) > 0 {
		if len(buf) < frameHeaderLen {
			return n, false, fmt.Errorf("read frame header: %w", io.ErrUnexpectedEOF)
		}
		s, size := int(buf[0]), int(binary.BigEndian.Uint32(buf[4:frameHeaderLen]))
		buf = buf[frameHeaderLen:]
		if size > len(buf) {
			return n, false, fmt.Errorf("read frame payload: %w", io.ErrUnexpectedEOF)
		}
		payload := buf[:size]
		buf = buf[size:]
		n++
		if s != int(Stdout) && s != int(Stderr) {
			continue // readFrom reports it
		}
		sp := bytes.IndexByte(payload[:min(len(payload), maxPrefixLen)], ' ')
		if sp < 0 {
			continue
		}
		ts, perr := time.Parse(time.RFC3339Nano, string(payload[:sp]))
		if perr != nil {
			continue
		}
		if first.IsZero() {
			first = ts
		}
		if last := r.last[s]; !last.IsZero() && ts.Before(last.Time) {
			hasOld[s] = true
		}
	}
	for _, s := range []Stream{Stdout, Stderr} {
		if hasOld[s] {
			continue
		}
		if r.seen[s].IsZero() || first.IsZero() || first.Add(logSkew).After(r.seen[s]) {
			return n, false, nil
		}
	}
	return n, true, nil
}

// deliver sends l unless its stream already delivered it (or it is at or
// before `after`).
func (r *lineReader) deliver(ctx context.Context, l Line) bool {
	if !l.Cursor.After(r.last[l.Stream]) {
		return true
	}
	r.last[l.Stream] = l.Cursor
	select {
	case r.out <- l:
		r.delivered++
		if r.gate != nil {
			r.gate.delivered(l.Size)
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *lineReader) fail(ctx context.Context, err error) {
	select {
	case r.out <- Line{Err: err}:
	case <-ctx.Done():
	}
}
