package orchestrator

import (
	"log/slog"
	"slices"
	"time"
)

// tracer logs, at debug level, how long after its beginning each step of a
// start was done: the fan-out a user waits for is the sum of these under
// the engine's contention (docs/benchmarks.md found its costs with them).
type tracer struct {
	log   *slog.Logger
	msg   string // "start phase" (a swarm's), "start step" (a container's)
	key   string // the attribute that names the step
	attrs []any  // what the steps are of: the repository, the container
	t0    time.Time
}

func newTracer(log *slog.Logger, msg, key string, attrs ...any) *tracer {
	return &tracer{log: log, msg: msg, key: key, attrs: attrs, t0: time.Now()}
}

// mark logs that step what is done.
func (t *tracer) mark(what string) {
	t.log.Debug(t.msg, append(slices.Clip(t.attrs), t.key, what, "after", time.Since(t.t0))...)
}
