package radar

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Kicks during a look coalesce into one more look, and a look is followed
// by a pause of (1/Duty-1) times its length.
func TestWatcherCoalescesAndPauses(t *testing.T) {
	w := NewWatcher()
	var looks atomic.Int32
	var starts []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(context.Context) (time.Duration, bool) {
			starts = append(starts, time.Now())
			if looks.Add(1) == 1 {
				<-release
				return 0, true // weighed by its wall time
			}
			return 0, false // ends Run after the second look
		})
	}()
	w.Kick()
	for looks.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range 100 {
		w.Kick() // while the first look runs
	}
	time.Sleep(20 * time.Millisecond) // the first look's length
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the second look never came")
	}
	if n := looks.Load(); n != 2 {
		t.Errorf("%d looks, want 2 (100 kicks during the first coalesce into one)", n)
	}
	if gap := starts[1].Sub(starts[0]); gap < time.Duration(float64(20*time.Millisecond)/Duty) {
		t.Errorf("the second look came %v after the first, want at least %v (Duty)", gap, time.Duration(float64(20*time.Millisecond)/Duty))
	}
}
