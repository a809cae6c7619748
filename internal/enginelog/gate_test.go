package enginelog

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/engine"
)

// callGate counts the reader's engine calls outstanding (the hold-back
// lets output flow while one has been for its stall bound).
type callGate struct{ calls atomic.Int32 }

func (g *callGate) Call(f func()) {
	g.calls.Add(1)
	defer g.calls.Add(-1)
	f()
}
func (g *callGate) Delivered(int) {}
func (g *callGate) Pending(int64) {}

// slowBody is a log whose body blocks once, after the open answered, until
// released: an engine slow to stream a large snapshot.
type slowBody struct {
	r       io.Reader
	reading chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *slowBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		close(b.reading)
		<-b.release
	})
	return b.r.Read(p)
}

func (b *slowBody) Close() error { return nil }

// Reading the body of an open log is no engine call the hold-back lets go
// for: the engine holds no container lock for it, so a slow read is a
// loaded engine, and releasing then let a flood write past the log's
// rotation lines the reader had not read. Only the open counts.
func TestSlowLogBodyIsNotAnEngineCallOfTheGate(t *testing.T) {
	for _, tail := range []int{tailStart, maxTail * 4} { // a tail read; the whole log as a stream
		body := &slowBody{r: bytes.NewReader(frame(engine.Stdout, at(1), "one\n")), reading: make(chan struct{}), release: make(chan struct{})}
		out := make(chan engine.Line, 16)
		g := &callGate{}
		opened := false
		r := &lineReader{id: "fake", out: out, gate: g, tail: tail, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			open: func(context.Context, time.Time, int) (io.ReadCloser, error) {
				opened = g.calls.Load() == 1
				return body, nil
			}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		done := make(chan error, 1)
		go func() {
			_, err := r.snapshot(ctx)
			done <- err
		}()
		select {
		case <-body.reading:
		case <-ctx.Done():
			t.Fatal("the snapshot never read the body")
		}
		during := g.calls.Load()
		close(body.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cancel()
		if !opened {
			t.Errorf("tail %d: the log's open is not an engine call of the gate", tail)
		}
		if during != 0 {
			t.Errorf("tail %d: a slow read of an open log's body counts as an engine call that releases the hold-back", tail)
		}
	}
}
