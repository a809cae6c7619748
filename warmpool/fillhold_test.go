package warmpool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// startDuringCreate is the engine with a start of the user's beginning
// while the pool's create is under way: Busy is taken as the create
// returns, and each Start notes whether that start was still holding.
type startDuringCreate struct {
	Engine
	pool    func() *Pool
	mu      sync.Mutex
	done    func()
	started []bool // per Start: the user's start still held the pool
}

func (e *startDuringCreate) Create(ctx context.Context, s engine.Spec) (string, error) {
	id, err := e.Engine.Create(ctx, s)
	e.mu.Lock()
	if e.done == nil {
		e.done = e.pool().Busy()
	}
	e.mu.Unlock()
	return id, err
}

func (e *startDuringCreate) Start(ctx context.Context, id string) error {
	e.mu.Lock()
	e.started = append(e.started, e.done != nil)
	e.mu.Unlock()
	return e.Engine.Start(ctx, id)
}

func (e *startDuringCreate) release() {
	e.mu.Lock()
	done := e.done
	e.done = nil
	e.mu.Unlock()
	done()
}

// TestAPoolSandboxCreatedAsAStartBeganWaitsForIt: a pool sandbox whose
// create was under way when a start began is started only once that start
// lets the pool go: its engine start would compete with the start's own.
func TestAPoolSandboxCreatedAsAStartBeganWaitsForIt(t *testing.T) {
	if testing.Short() {
		t.Skip("real engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d, labels, img := poolEngine(t, ctx, "warmpool-hold-")
	var p *Pool
	eng := &startDuringCreate{Engine: d, pool: func() *Pool { return p }}
	p = newHourPool(t, eng, labels)
	spec := engine.Spec{Name: "aimi-x", Image: img, MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20}
	p.SetTarget(spec, 1)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(pctx) }()
	defer func() { stop(); <-done }()

	// Created, held: it must not start while the start holds the pool.
	testwait.Eventually(t, 2*time.Minute, "the pool to make a sandbox", testwait.True(func() bool {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		return eng.done != nil
	}), testwait.Every(20*time.Millisecond))
	eng.release()
	waitIdle(t, p, spec, 1, nil)
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.started) == 0 {
		t.Fatal("no sandbox was started")
	}
	for i, held := range eng.started {
		if held {
			t.Errorf("start %d of a pool sandbox came while a start held the pool", i+1)
		}
	}
}
