package testwait_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/testwait"
)

// recorder stands in for the test Eventually fails, so that its failure can
// be read rather than failing this test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestReturnsOnceTheConditionHolds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	testwait.Eventually(r, time.Minute, "the third call", func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	}, testwait.Every(time.Millisecond))
	if r.failed != "" || calls != 3 {
		t.Fatalf("calls %d, failed %q", calls, r.failed)
	}
}

func TestFailsNamingWhatItAwaitedAndTheLastState(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	start := time.Now()
	testwait.Eventually(r, 50*time.Millisecond, "the door to open", func() error {
		calls++
		return fmt.Errorf("door closed (look %d)", calls)
	}, testwait.Every(10*time.Millisecond))
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("gave up after %v, before its timeout", time.Since(start))
	}
	want := fmt.Sprintf("timed out after 50ms waiting for the door to open; last: door closed (look %d)", calls)
	if r.failed != want {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
}

func TestAStateReachedInTheLastPauseCounts(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	testwait.Eventually(r, 10*time.Millisecond, "the late state", func() error {
		if time.Since(start) < 30*time.Millisecond {
			return testwait.ErrNotYet
		}
		return nil
	}, testwait.Every(40*time.Millisecond))
	if r.failed != "" {
		t.Fatalf("failed %q: the poll after the deadline did not count", r.failed)
	}
}

func TestTrueSaysNotYet(t *testing.T) {
	ok := false
	cond := testwait.True(func() bool { return ok })
	if err := cond(); !errors.Is(err, testwait.ErrNotYet) {
		t.Fatalf("%v", err)
	}
	ok = true
	if err := cond(); err != nil {
		t.Fatalf("%v", err)
	}
	r := &recorder{TB: t}
	testwait.Eventually(r, time.Millisecond, "never", testwait.True(func() bool { return false }))
	if !strings.HasSuffix(r.failed, "waiting for never; last: not yet") {
		t.Fatalf("failure %q", r.failed)
	}
}
