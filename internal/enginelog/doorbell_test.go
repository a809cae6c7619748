package enginelog

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aimi-tools/swarm/engine"
)

// A reader with a doorbell takes no snapshot while the container is quiet;
// a ring brings the new line, and the doorbell's end with the container
// exited brings the last one and ends the reader. It runs in a synctest
// bubble: "quiet" is every goroutine blocked, and the quiet stretch is
// most of idleRead on the bubble's clock.
func TestLineReaderReadsWhenTheDoorbellRingsAndNotOtherwise(t *testing.T) {
	synctest.Test(t, testLineReaderReadsWhenTheDoorbellRingsAndNotOtherwise)
}

func testLineReaderReadsWhenTheDoorbellRingsAndNotOtherwise(t *testing.T) {
	f := &fakeLog{status: "running"}
	f.add(engine.Stdout, 1, "a\n")
	bellR, bellW := io.Pipe()
	defer bellW.Close() // a failed test's doorbell ends too
	ctx, cancel := context.WithTimeout(context.Background(), 10*idleRead)
	defer cancel()
	out := make(chan engine.Line)
	r := &lineReader{id: "fake", out: out, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		open: f.open, inspect: f.inspect,
		ring: func(context.Context) (io.ReadCloser, error) { return bellR, nil }}
	go func() {
		defer close(out)
		r.run(ctx, true)
	}()
	next := func() engine.Line {
		t.Helper()
		select {
		case l := <-out:
			return l
		case <-ctx.Done():
			t.Fatal("no line")
			return engine.Line{}
		}
	}
	if l := next(); string(l.Data) != "a" {
		t.Fatalf("first line %q", l.Data)
	}
	opens := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.opens
	}
	// Quiet: the reader settles on the doorbell after a snapshot or two,
	// then reads no more until idleRead.
	time.Sleep(time.Second)
	synctest.Wait()
	settled := opens()
	time.Sleep(idleRead - 2*time.Second)
	synctest.Wait()
	if n := opens() - settled; n != 0 {
		t.Fatalf("%d snapshots of a quiet container in %s", n, idleRead-2*time.Second)
	}
	f.mu.Lock()
	f.add(engine.Stdout, 2, "b\n")
	f.mu.Unlock()
	if _, err := bellW.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if l := next(); string(l.Data) != "b" {
		t.Fatalf("line after the ring %q", l.Data)
	}
	f.mu.Lock()
	f.add(engine.Stdout, 3, "c")
	f.status = "exited"
	f.mu.Unlock()
	bellW.Close()
	if l := next(); string(l.Data) != "c" {
		t.Fatalf("last line %q", l.Data)
	}
	if l, ok := <-out; ok {
		t.Fatalf("the reader went on after the exit: %+v", l)
	}
}
