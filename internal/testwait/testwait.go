package testwait

import (
	"errors"
	"testing"
	"time"
)

// DefaultInterval is the pause between two polls unless Every says
// otherwise: short beside the seconds the awaited things take, long enough
// that a poll (a status call, a file read) does not load the machine.
const DefaultInterval = 100 * time.Millisecond

// ErrNotYet is what a condition with nothing more to say about the state it
// saw returns while it does not hold.
var ErrNotYet = errors.New("not yet")

// Option changes how Eventually polls.
type Option func(*poll)

type poll struct{ every time.Duration }

// Every polls every d instead of DefaultInterval: for a poll that costs
// (a command run in a container) or a state that changes fast.
func Every(d time.Duration) Option { return func(p *poll) { p.every = d } }

// Eventually calls cond until it returns nil, pausing between calls, and
// fails t (Fatalf) once timeout has passed since the first call, naming
// what it waited for and cond's last error: the condition says in that
// error what it saw (the status, the file's content), so that the failure
// shows the last state rather than only that time ran out. cond is always
// called at least once and once more after the deadline has passed, so that
// a state reached during the last pause still counts. cond runs on the
// test's goroutine and may itself fail t (a state that can no longer
// change for the better).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error, opts ...Option) {
	t.Helper()
	p := poll{every: DefaultInterval}
	for _, o := range opts {
		o(&p)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, err)
			return
		}
		time.Sleep(p.every)
	}
}

// True is cond for a condition with no state worth telling: ErrNotYet
// while ok returns false.
func True(ok func() bool) func() error {
	return func() error {
		if ok() {
			return nil
		}
		return ErrNotYet
	}
}
