package container

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/enginelog"
	"github.com/aimi-tools/swarm/internal/logcursor"
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
	out := make(chan engine.Line, enginelog.OutBuffer)
	src := enginelog.Source{
		Open: func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error) {
			opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: "all"}
			if tail >= 0 {
				opts.Tail = strconv.Itoa(tail)
			}
			if !since.IsZero() {
				opts.Since = enginelog.SinceParam(since)
			}
			return d.openLogs(ctx, id, opts)
		},
		Inspect: func(ctx context.Context) (engine.Info, error) { return d.Inspect(ctx, id) },
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
		src.Ring = func(ctx context.Context) (io.ReadCloser, error) {
			return d.openLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Tail: "0"})
		}
		g := newOutputGate()
		src.Gate = g
		hold = d.attachHoldBack(hctx, id, g)
	}
	go func() {
		defer close(out)
		defer stopHold()
		if hold != nil {
			go hold()
		}
		enginelog.Run(ctx, id, after, follow, src, out, d.log)
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
