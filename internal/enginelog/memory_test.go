package enginelog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// maxIdleFollower bounds what one follow of a quiet container holds: its
// two goroutines (reader and doorbell) with their stacks, the doorbell's
// read buffer and the channel its lines go to. A daemon follows every
// container it runs, so at 200 containers each KiB here is 200 KiB of the
// daemon's memory (the doorbell's read buffer was 32 KiB, the channel 22
// KiB: 11 MB at 200; 66 KiB in all, 13-23 KiB now).
const maxIdleFollower = 32 << 10

// TestAnIdleFollowerHoldsLittleMemory follows n quiet containers until
// every reader waits on its doorbell, then measures the live heap and the
// goroutine stacks they hold.
func TestAnIdleFollowerHoldsLittleMemory(t *testing.T) {
	const n = 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs := make([]*fakeLog, n)
	for i := range logs {
		logs[i] = &fakeLog{status: "running"}
		logs[i].add(engine.Stdout, 1, fmt.Sprintf("line of container %d\n", i))
	}
	before := liveBytes()
	outs := make([]chan engine.Line, n)
	for i, f := range logs {
		outs[i] = make(chan engine.Line, OutBuffer)
		// A doorbell that never rings: the container stays quiet.
		ring := func(ctx context.Context) (io.ReadCloser, error) {
			r, w := io.Pipe()
			context.AfterFunc(ctx, func() { w.Close() })
			return r, nil
		}
		go Run(ctx, fmt.Sprint(i), logcursor.Position{}, true, Source{Open: f.open, Inspect: f.inspect, Ring: ring}, outs[i], log)
	}
	for i := range outs {
		if l := <-outs[i]; l.Err != nil {
			t.Fatal(l.Err)
		}
	}
	// Each reader takes its first snapshot (the line), a quiet one, opens
	// its doorbell and takes one more, then waits on the doorbell.
	testwait.Eventually(t, time.Minute, fmt.Sprintf("3 snapshots of each of %d quiet containers", n), func() error {
		opened := 0
		for _, f := range logs {
			f.mu.Lock()
			opened += f.opens
			f.mu.Unlock()
		}
		if opened < 3*n {
			return fmt.Errorf("%d snapshots", opened)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	// The least of a few measurements: a reader still finishing its last
	// snapshot holds that snapshot's buffers for a moment, an idle one
	// holds only what it keeps.
	live := liveBytes()
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		live = min(live, liveBytes())
	}
	per := (live - before) / n
	t.Logf("an idle follower holds %d bytes", per)
	if per > maxIdleFollower {
		t.Errorf("an idle follower holds %d bytes, want at most %d", per, maxIdleFollower)
	}
	runtime.KeepAlive(outs)
}

// liveBytes is the heap that survives a collection plus the goroutines'
// stacks.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
