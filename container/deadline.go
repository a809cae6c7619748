package container

import (
	"context"
	"fmt"
	"time"
)

const (
	// engineCallTimeout bounds an engine call that should answer promptly
	// (inspect, list, remove, opening a log or an attach): a call the
	// engine does not answer (a container it holds locked, an engine that
	// hangs) must not hang the daemon's view of that container. Generous,
	// because an inspect waits for a start of the same container, and 20
	// starts at once on a loaded 2-core engine took over 30 s: a deadline
	// that fires on a slow engine turns slowness into failures.
	engineCallTimeout = 2 * time.Minute
	// startTimeout bounds a start, which the engine queues behind others.
	startTimeout = 5 * time.Minute
)

// callCtx is ctx bounded by engineCallTimeout.
func callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, engineCallTimeout)
}

// bounded runs f, which the client library cannot cancel once it has its
// connection (an attach's hijack ignores ctx), with a deadline: when f has
// not returned by then, bounded returns an error and leaves f to finish in
// the background, handing what it returns to drop (close it).
func bounded[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error), drop func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	done := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		cancel()
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			defer cancel()
			if r := <-done; r.err == nil {
				drop(r.v)
			}
		}()
		var zero T
		return zero, fmt.Errorf("the engine did not answer within %s: %w", d, ctx.Err())
	}
}

// openBounded is for a streaming call (a log read): ctx governs the
// stream for as long as it is read, but the call must answer (send its
// headers) within engineCallTimeout. The returned stop ends the stream's
// context; call it when the stream is closed.
func openBounded(ctx context.Context) (sctx context.Context, answered func() bool, stop context.CancelFunc) {
	sctx, stop = context.WithCancel(ctx)
	t := time.AfterFunc(engineCallTimeout, stop)
	return sctx, t.Stop, stop
}
