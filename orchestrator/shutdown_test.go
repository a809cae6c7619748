package orchestrator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// slowStop is an engine whose Stop blocks until released, as a real one
// does for the stop grace of a container that ignores SIGTERM.
type slowStop struct {
	*fakeEngine
	entered  chan struct{}
	release  chan struct{}
	returned atomic.Bool
}

func (e *slowStop) Stop(ctx context.Context, id string, grace time.Duration) error {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	<-e.release
	defer e.returned.Store(true)
	return e.fakeEngine.Stop(ctx, id, 0)
}

// TestShutdownWaitsForStops: a stop under way (here the timeout's) is part
// of what Shutdown waits for; it does not leave a goroutine stopping a
// container behind it.
func TestShutdownWaitsForStops(t *testing.T) {
	repo, files := testRepo(t, []string{"slow"}, 1)
	eng := &slowStop{
		fakeEngine: newFakeEngine(byTask(nil, scripted(0, step{hang: true}))),
		entered:    make(chan struct{}, 1),
		release:    make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := New(ctx, Config{Image: "standin:test", Logger: testLogger(t), Timeout: 50 * time.Millisecond}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-eng.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the timeout never stopped the container")
	}
	// The stop cannot return before release: a Shutdown that waits for it
	// runs into its deadline.
	sctx, scancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer scancel()
	err = m.Shutdown(sctx)
	if !errors.Is(err, context.DeadlineExceeded) || eng.returned.Load() {
		t.Fatalf("Shutdown with a stop under way = %v (stop returned: %v); want it to wait for the stop", err, eng.returned.Load())
	}
	close(eng.release)
	sctx2, scancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel2()
	if err := m.Shutdown(sctx2); err != nil {
		t.Fatalf("Shutdown after the stop returned: %v", err)
	}
	if !eng.returned.Load() {
		t.Fatal("Shutdown returned before the stop")
	}
}
