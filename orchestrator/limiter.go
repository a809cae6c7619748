package orchestrator

import (
	"context"
	"sync"
)

// limiter bounds how many containers of a swarm run at once and hands out
// the slots strictly in the order the containers were queued (task-file
// order). semaphore.Weighted is FIFO too, but only in the order its Acquire
// calls happen, and supervisor goroutines reach Acquire in whatever order
// the scheduler runs them; queueing synchronously in launch fixes the order.
type limiter struct {
	mu    sync.Mutex
	max   int
	used  int
	queue []*ticket
}

// ticket is one queued container's place in line.
type ticket struct {
	ready   chan struct{} // closed when the slot is granted
	granted bool
	gone    bool // the waiter gave up
}

func newLimiter(max int) *limiter { return &limiter{max: max} }

// enqueue takes a place in line.
func (l *limiter) enqueue() *ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &ticket{ready: make(chan struct{})}
	l.queue = append(l.queue, t)
	l.grantLocked()
	return t
}

// wait blocks until the ticket's slot is granted (true) or ctx ends
// (false, the place is given up).
func (l *limiter) wait(ctx context.Context, t *ticket) bool {
	select {
	case <-t.ready:
		if ctx.Err() == nil {
			return true
		}
		// Granted as ctx ended (select picks at random): give it back,
		// or a dying supervisor would start a container.
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.granted {
		l.used--
		t.granted = false
	}
	t.gone = true
	l.grantLocked()
	return false
}

// isGranted reports whether the ticket holds its slot already.
func (l *limiter) isGranted(t *ticket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return t.granted
}

// take occupies a slot without waiting: a re-attached container is running
// whether or not a slot is free.
func (l *limiter) take() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used++
}

// release frees a slot and grants it to the next in line.
func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used--
	l.grantLocked()
}

func (l *limiter) grantLocked() {
	for l.used < l.max && len(l.queue) > 0 {
		t := l.queue[0]
		l.queue = l.queue[1:]
		if t.gone {
			continue
		}
		t.granted = true
		l.used++
		close(t.ready)
	}
}
