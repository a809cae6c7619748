package orchestrator

import (
	"context"
	"sync"
	"time"
)

// waveMaxWait bounds how long a started container waits for the rest of
// its start wave before it is given its work anyway: one slow start must
// not hold the others' work back for long.
const waveMaxWait = 30 * time.Second

// startWave lets the containers of a fan-out all start before any of them
// is given its task-request. On a small machine the engine's starts are
// the fan-out's critical path (runc, the network hooks, the storage
// driver), and the first containers' clones, agents and pushes compete
// with them for the same cores: measured on 2 cores, 16 containers
// reached running 1.5 s later with work beginning as each started than
// with runners that stayed idle. So the work of a wave begins when the
// wave is started, which for the last container is sooner and for the
// first a few seconds later (bounded by waveMaxWait).
//
// A sandbox claimed from the warm pool runs already: its claim asks the
// engine for an inspect and a rename, not a start, so while no container
// of its wave is being created it is given its work at once, on cores the
// claims leave idle (measured on 2 cores, 32 claimed sandboxes: the first
// worked at 0.34-0.48 s instead of 0.44-0.67 s, the last at 0.83-0.99 s
// instead of 0.93-1.25 s). Once one is created (the pool ran dry) the
// claimed ones wait for the wave as created ones do; those given their
// work before that compete with the creates, at most the pool's size.
//
// A container counts from the moment its supervisor is launched with a
// run slot until its start returned (or it gave up); containers queued for
// a slot are not part of the wave. Each swarm has a wave of its own (its
// start, then each append or resume): a wave shared by every repository's
// swarm let one repository's slow start hold another's work back for up to
// waveMaxWait.
type startWave struct {
	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending == 0
	cold    bool          // a container of the wave is being created
}

func newStartWave() *startWave {
	idle := make(chan struct{})
	close(idle)
	return &startWave{idle: idle}
}

// startWave is the swarm's start wave, made at its first use.
func (sw *swarm) startWave() *startWave {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.wave == nil {
		sw.wave = newStartWave()
	}
	return sw.wave
}

// join counts one container in the wave; the returned leave takes it out
// and may be called any number of times.
func (w *startWave) join() (leave func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == 0 {
		w.idle = make(chan struct{})
		w.cold = false
	}
	w.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.pending--
			if w.pending == 0 {
				close(w.idle)
			}
		})
	}
}

// wait returns once no container of the wave is still starting, after
// max, or when ctx ends; for a claimed sandbox (already running) at once
// while no container of the wave is being created. False when it did not
// wait.
func (w *startWave) wait(ctx context.Context, max time.Duration, claimed bool) bool {
	w.mu.Lock()
	idle, cold := w.idle, w.cold
	w.mu.Unlock()
	if claimed && !cold {
		return false
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	return true
}

// creating notes that a container of the wave is being created, not
// claimed: claimed sandboxes wait for the wave from now on.
func (w *startWave) creating() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cold = true
}
