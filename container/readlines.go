package container

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// LogSource is what ReadLines needs from an engine: read the log of one
// sandbox as it is now (multiplexed frames with timestamps; its last `tail`
// entries, all for a negative tail, at or after since; zero since means
// from the start) and say the sandbox's state.
type LogSource struct {
	Open    func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error)
	Inspect func(ctx context.Context) (engine.Info, error)
}

// ReadLines is Lines for an engine other than *Docker whose log endpoint
// speaks the same format (Swarm mode's service and task logs): the lines
// strictly after the position, read in snapshots as Lines reads them (but
// without holding the sandbox back), closed once it exited and its output
// was read. Inspect reporting Status "exited" or "dead" ends it.
func ReadLines(ctx context.Context, id string, after logcursor.Position, follow bool, src LogSource, log *slog.Logger) <-chan engine.Line {
	if log == nil {
		log = slog.Default()
	}
	out := make(chan engine.Line, 256)
	r := &lineReader{id: id, after: after, out: out, log: log, open: src.Open, inspect: src.Inspect}
	go func() {
		defer close(out)
		r.run(ctx, follow)
	}()
	return out
}
