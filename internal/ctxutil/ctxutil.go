// Package ctxutil holds the two context helpers several packages need: a
// sleep that a context ends early, and a context that also ends when a
// server shuts down.
package ctxutil

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WithDone returns a context that ends with parent or when done is closed,
// whichever comes first: a stream a server answers ends with its request or
// with the server's shutdown.
func WithDone(parent context.Context, done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
