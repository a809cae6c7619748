package enginelog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// Source is one sandbox's log on an engine that speaks the Docker Engine
// API's log format (a container's logs, a Swarm mode service's).
type Source struct {
	// Open returns the log as it is now: multiplexed frames with
	// timestamps, its last `tail` entries (all for a negative tail) at or
	// after since (zero: from the start).
	Open func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error)
	// Inspect reports the sandbox's state; Status "exited" or "dead" ends
	// a follow once the output is read.
	Inspect func(ctx context.Context) (engine.Info, error)
	// Ring, when set, opens the doorbell: a stream that carries the
	// sandbox's new output as it is written and ends when it stops. Without
	// it a follow polls.
	Ring func(ctx context.Context) (io.ReadCloser, error)
	// Gate, when set, is told how far the reader got and when it waits
	// for the engine (a backend that holds the sandbox back to the
	// reader's pace).
	Gate Gate
}

// Gate is what a backend that holds a sandbox's output back learns from
// the reader.
type Gate interface {
	// Call runs f, an engine call of the reader.
	Call(f func())
	// Delivered notes a line of size bytes (newline excluded) handed over.
	Delivered(size int)
	// Pending notes the bytes of lines still open at the last read.
	Pending(n int64)
}

// Run reads src's lines strictly after the position into out (see
// container.Docker.Lines for the rules) until the sandbox exited and its
// output was read (follow), what is there now was read (no follow), or ctx
// ends. It does not close out.
func Run(ctx context.Context, id string, after logcursor.Position, follow bool, src Source, out chan<- engine.Line, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	r := &lineReader{id: id, after: after, out: out, log: log, open: src.Open, inspect: src.Inspect, ring: src.Ring, gate: src.Gate}
	r.run(ctx, follow)
}

// OutBuffer is the capacity of the channel a follow's lines go to: enough
// that the reader and its receiver do not take turns line by line, and no
// more, since every follow holds one for as long as its container runs (at
// 256 lines, 22 KiB each).
const OutBuffer = 64

// Read is Run on a goroutine of its own, into a channel it closes at the
// end.
func Read(ctx context.Context, id string, after logcursor.Position, follow bool, src Source, log *slog.Logger) <-chan engine.Line {
	out := make(chan engine.Line, OutBuffer)
	go func() {
		defer close(out)
		Run(ctx, id, after, follow, src, out, log)
	}()
	return out
}

// call runs f as an engine call of the reader.
func (r *lineReader) call(f func()) {
	if r.gate == nil {
		f()
		return
	}
	r.gate.Call(f)
}

// SinceParam is t as the engine's Since and Until options take it: Unix
// seconds with nanoseconds.
func SinceParam(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
