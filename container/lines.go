package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/internal/logcursor"
)

const (
	// skewWindow is how far back each re-read starts before the newest line
	// already delivered. stdout and stderr are logged by two goroutines that
	// take their timestamps before writing, so the log file's order can put
	// a line with a slightly older timestamp after a newer one; re-reading a
	// window (and dropping lines already delivered) catches such a line if
	// it landed after the previous read ended.
	skewWindow = 2 * time.Second
	// maxReadFailures bounds how many consecutive failed reads (engine
	// gone, errors in the stream) Lines tolerates before giving up.
	maxReadFailures = 20
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
// Lines on one stream come in order. Across stdout and stderr the order is
// the engine log's, which follows the timestamps to within the skew of two
// goroutines (skewWindow).
func (d *Docker) Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan Line, error) {
	if _, err := d.cli.ContainerInspect(ctx, id); err != nil {
		return nil, fmt.Errorf("read output of container %s: %w", id, notFound(err))
	}
	out := make(chan Line, 256)
	r := &lineReader{
		id: id, after: after, out: out, log: d.log,
		open: func(ctx context.Context, since time.Time, follow bool) (io.ReadCloser, error) {
			opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Follow: follow}
			if !since.IsZero() {
				opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
			}
			rc, err := d.cli.ContainerLogs(ctx, id, opts)
			if err != nil {
				return nil, fmt.Errorf("open logs: %w", notFound(err))
			}
			return rc, nil
		},
		inspect: func(ctx context.Context) (Info, error) { return d.Inspect(ctx, id) },
	}
	go func() {
		defer close(out)
		r.run(ctx, follow)
	}()
	return out, nil
}

// lineReader is one Lines call: repeated passes over the engine's log, each
// from Since=floor-skewWindow, delivering every line after `after` exactly
// once.
type lineReader struct {
	id  string
	log *slog.Logger
	// open returns the engine's multiplexed, timestamped log stream with
	// entries since the given time (inclusive; zero: all), following or
	// not. inspect reports the container's state.
	open    func(ctx context.Context, since time.Time, follow bool) (io.ReadCloser, error)
	inspect func(ctx context.Context) (Info, error)
	after   logcursor.Position
	out     chan<- Line
	// floor: every line with a time before it has been delivered (or is at
	// or before `after`). Each pass asks the engine for lines since
	// floor-skewWindow.
	floor time.Time
	// last is the cursor of the last line delivered (or `after`) per
	// stream: a stream's lines come in order, so anything at or before it
	// was delivered already.
	last      [3]logcursor.Cursor // indexed by Stream
	newest    time.Time           // newest delivered line's time
	delivered int                 // lines sent so far
}

// startFloor is where the first pass starts (less skewWindow). A stream's
// lines older than the other stream's cursor by more than skewWindow came
// before that cursor's line in the log, so they were taken already; a
// stream without a cursor starts there too.
func startFloor(after logcursor.Position) time.Time {
	out, errT := after.Stdout.Time, after.Stderr.Time
	switch {
	case out.IsZero():
		return errT
	case errT.IsZero():
		return out
	}
	return minTime(maxTime(out, errT.Add(-skewWindow)), maxTime(errT, out.Add(-skewWindow)))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (r *lineReader) run(ctx context.Context, follow bool) {
	r.floor = startFloor(r.after)
	r.last[Stdout], r.last[Stderr] = r.after.Stdout, r.after.Stderr
	failures, delivered := 0, 0
	backoff := 20 * time.Millisecond
	// final: this pass is the last (not following). exited: the container
	// is known to have exited, so an open line at the end is complete.
	final, exited := !follow, false
	for {
		fs := newFrameSplitter(MaxLineBytes, func(l Line) bool { return r.deliver(ctx, l) })
		err := r.pass(ctx, fs, follow && !final)
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		if final && err == nil {
			// Once the container has exited, a last line without a newline
			// is a line; while it runs, it is half a line and stays unread
			// (a later reader from this cursor gets it whole).
			if exited || r.hasExited(ctx) {
				fs.flush()
			}
			return
		}
		r.advanceFloor(fs)
		if err != nil {
			failures++
			r.log.Warn("reading container output failed, re-reading from the cursor", "container", r.id, "err", err, "failures", failures)
			if failures >= maxReadFailures {
				r.fail(ctx, fmt.Errorf("read output of container %s: giving up after %d failed reads: %w", r.id, failures, err))
				return
			}
		} else {
			failures = 0
		}
		info, ierr := r.inspect(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(ierr, ErrNotFound):
			r.fail(ctx, fmt.Errorf("read output of container %s: %w (removed; its output is gone)", r.id, ErrNotFound))
			return
		case ierr != nil:
			failures++
			if failures >= maxReadFailures {
				r.fail(ctx, fmt.Errorf("read output of container %s: %w", r.id, ierr))
				return
			}
		case info.Status == "exited" || info.Status == "dead":
			// One more pass, not following, started after the exit: it
			// picks up whatever the follow stream had not delivered yet.
			final, exited = true, true
			continue
		}
		// Created: the engine does not follow a container that has not
		// started, so poll until it does. Running, paused, restarting: the
		// follow stream ended early (engine hiccup), read on soon.
		if r.delivered > delivered {
			backoff = 20 * time.Millisecond
		}
		delivered = r.delivered
		if sleepCtx(ctx, backoff) != nil {
			return
		}
		// Waiting for a start should not add much latency; waiting out
		// failures may.
		limit := time.Second
		if err == nil && ierr == nil && info.Status == "created" {
			limit = 250 * time.Millisecond
		}
		backoff = min(2*backoff, limit)
	}
}

func (r *lineReader) hasExited(ctx context.Context) bool {
	info, err := r.inspect(ctx)
	return err == nil && (info.Status == "exited" || info.Status == "dead")
}

// pass reads the log once from skewWindow before the floor.
func (r *lineReader) pass(ctx context.Context, fs *frameSplitter, follow bool) error {
	var since time.Time
	if !r.floor.IsZero() {
		since = r.floor.Add(-skewWindow)
	}
	if since.Unix() <= 0 {
		since = time.Time{} // the engine's Since takes no times before 1970
	}
	rc, err := r.open(ctx, since, follow)
	if err != nil {
		return err
	}
	defer rc.Close()
	return fs.readFrom(rc)
}

// deliver sends l unless its stream already delivered it (or it is at or
// before `after`).
func (r *lineReader) deliver(ctx context.Context, l Line) bool {
	if !l.Cursor.After(r.last[l.Stream]) {
		return true
	}
	r.last[l.Stream] = l.Cursor
	if l.Cursor.Time.After(r.newest) {
		r.newest = l.Cursor.Time
	}
	select {
	case r.out <- l:
		r.delivered++
		return true
	case <-ctx.Done():
		return false
	}
}

// advanceFloor moves the floor to the newest delivered line, but not past a
// line still open (it will be re-read whole).
func (r *lineReader) advanceFloor(fs *frameSplitter) {
	floor := r.newest
	if t, ok := fs.oldestPending(); ok && t.Before(floor) {
		floor = t
	}
	if floor.After(r.floor) {
		r.floor = floor
	}
}

func (r *lineReader) fail(ctx context.Context, err error) {
	select {
	case r.out <- Line{Err: err}:
	case <-ctx.Done():
	}
}
