package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/testwait"
)

// fakeClock is a limiter's clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// waitQueuedN waits until n calls wait at l's gates.
func waitQueuedN(t *testing.T, l *limiter, n int) {
	t.Helper()
	testwait.Eventually(t, time.Minute, fmt.Sprintf("%d calls waiting", n), func() error {
		l.mu.Lock()
		q := 0
		for _, g := range l.gates {
			q += g.queued
		}
		l.mu.Unlock()
		if q != n {
			return fmt.Errorf("%d calls waiting", q)
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
}

// callThrough makes one call of c through l and sends how it ended.
func callThrough(l *limiter, c caller, got chan<- error) {
	d, err := l.acquire(context.Background(), c)
	if err == nil {
		d.done(http.StatusOK, nil)
	}
	got <- err
}

// noteRecorder is an onWait that keeps the notes.
type noteRecorder struct {
	mu    sync.Mutex
	notes []WaitNote
}

func (r *noteRecorder) add(n WaitNote) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, n)
}

func (r *noteRecorder) get() []WaitNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notes)
}

func (r *noteRecorder) waitFor(t *testing.T, n int) []WaitNote {
	t.Helper()
	testwait.Eventually(t, time.Minute, fmt.Sprintf("%d wait notes", n), func() error {
		if got := r.get(); len(got) < n {
			return fmt.Errorf("%d wait notes: %+v", len(got), got)
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
	return r.get()
}

// requests_per_minute: calls past it wait, are listed as such, and are
// let through round-robin between containers as the minute passes.
func TestRequestsPerMinuteHoldsCallsFairly(t *testing.T) {
	l := newLimiter(time.Hour, 64)
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	l.now = clock.now
	rpm := func(c string) caller {
		return caller{provider: "anthropic", account: "K", who: who{Swarm: "sw", Container: c}, perMinute: 2}
	}
	for _, c := range []string{"a", "b"} {
		pass, err := l.acquire(context.Background(), rpm(c))
		if err != nil {
			t.Fatal(err)
		}
		pass.done(http.StatusOK, nil) // over, but it began within the minute
	}
	granted := make(chan string, 3)
	for i, c := range []string{"a", "a", "b"} {
		go func() {
			pass, err := l.acquire(context.Background(), rpm(c))
			if err != nil {
				t.Errorf("%s: %v", c, err)
				granted <- "error"
				return
			}
			pass.done(http.StatusOK, nil)
			granted <- c
		}()
		waitQueuedN(t, l, i+1)
	}
	ws := l.waitsNow()
	if len(ws) != 2 || ws[0].Container != "a" || ws[0].Calls != 2 || ws[1].Container != "b" ||
		ws[0].Reason != WaitPerMinute || ws[0].String() != "waiting for a anthropic call slot (requests_per_minute 2)" {
		t.Fatalf("waits %+v", ws)
	}
	clock.add(61 * time.Second)
	l.mu.Lock()
	l.dispatchProvider("anthropic")
	l.mu.Unlock()
	l.flush()
	got := []string{<-granted, <-granted}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("let through after the minute: %v, want a's first call and b's (round-robin)", got)
	}
	waitQueuedN(t, l, 1)
	if ws := l.waitsNow(); len(ws) != 1 || ws[0].Container != "a" || ws[0].Calls != 1 {
		t.Fatalf("waits after the minute %+v, want a's second call", ws)
	}
	clock.add(61 * time.Second)
	l.mu.Lock()
	l.dispatchProvider("anthropic")
	l.mu.Unlock()
	if c := <-granted; c != "a" {
		t.Fatalf("last: %s", c)
	}
	if ws := l.waitsNow(); len(ws) != 0 {
		t.Fatalf("waits at the end %+v", ws)
	}
}

// A wait for a limit is told at once with its reset and its end when
// the calls go on; a wait for a place only once it lasted a second.
func TestWaitsAreToldAndListed(t *testing.T) {
	l := newLimiter(time.Hour, 64)
	rec := &noteRecorder{}
	l.onWait = rec.add
	pass, _ := l.acquire(context.Background(), callOf("a"))
	pass.done(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	got := make(chan error, 1)
	go callThrough(l, callOf("b"), got)
	notes := rec.waitFor(t, 1)
	n := notes[0]
	if !n.Ended.IsZero() || n.Container != "b" || n.Swarm != "sw" || n.Reason != WaitLimit || n.Until.IsZero() ||
		n.String() != "waiting for anthropic limit until "+n.Until.Local().Format(time.TimeOnly) {
		t.Fatalf("first note %+v %q", n, n.String())
	}
	if ws := l.waitsNow(); len(ws) != 1 || ws[0].Until != n.Until {
		t.Fatalf("waits %+v", ws)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	notes = rec.waitFor(t, 2)
	if e := notes[1]; e.Ended.IsZero() || e.Container != "b" || !strings.Contains(e.String(), "the wait for anthropic is over after") || e.Ended.Before(n.Until) {
		t.Fatalf("end note %+v %q", e, e.String())
	}
	// max_concurrent 1: a short wait is no news, a long one is.
	slot := func(c string) caller {
		return caller{provider: "anthropic", account: "K", who: who{Swarm: "sw", Container: c}, maxConcurrent: 1}
	}
	hold, _ := l.acquire(context.Background(), slot("a"))
	go callThrough(l, slot("b"), got)
	waitQueuedN(t, l, 1)
	if len(rec.get()) != 2 {
		t.Fatalf("a wait for a place told at once: %+v", rec.get())
	}
	notes = rec.waitFor(t, 3)
	if n := notes[2]; n.Reason != WaitConcurrency || n.String() != "waiting for a anthropic call slot (max_concurrent 1)" {
		t.Fatalf("slot note %+v", n)
	}
	hold.done(http.StatusOK, nil)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if notes = rec.waitFor(t, 4); notes[3].Ended.IsZero() {
		t.Fatalf("no end of the slot wait: %+v", notes)
	}
	hold2, _ := l.acquire(context.Background(), slot("a"))
	go callThrough(l, slot("b"), got)
	waitQueuedN(t, l, 1)
	hold2.done(http.StatusOK, nil)
	<-got
	// Let through: its wait is gone, and its report timer with it.
	l.mu.Lock()
	left := len(l.waits)
	l.mu.Unlock()
	if n := len(rec.get()); n != 4 || left != 0 {
		t.Fatalf("a wait of a moment was told (%+v), or is still kept (%d)", rec.get()[4:], left)
	}
}

// agent.limit_max_wait bounds whatever a limited answer asks for:
// enormous, negative and garbled values alike.
func TestLimitMaxWaitBoundsTheReset(t *testing.T) {
	for _, h := range []http.Header{
		{"Retry-After": {"99999999999"}},
		{"Retry-After": {"-5"}},
		{"Retry-After": {"soon"}},
		{"Retry-After-Ms": {"1e300"}},
		{"Anthropic-Ratelimit-Requests-Reset": {"9999-12-31T23:59:59Z"}},
		{"X-Ratelimit-Reset-Requests": {"2562047h"}},
		{},
	} {
		l := newLimiter(time.Hour, 64)
		l.maxReset = 3 * time.Second
		before := time.Now()
		pass, _ := l.acquire(context.Background(), callOf("a"))
		pass.done(http.StatusTooManyRequests, h)
		g := l.gates[gateKey{"anthropic", "K"}]
		if g.until.Before(before) || g.until.After(time.Now().Add(3*time.Second)) {
			t.Errorf("%v: reset in %s, want at most 3s (agent.limit_max_wait)", h, time.Until(g.until))
		}
	}
}

func TestWaitWordsWithoutABound(t *testing.T) {
	if got := (Wait{Provider: "openai", Reason: WaitConcurrency}).String(); got != "waiting for a openai call slot" {
		t.Errorf("%q", got)
	}
}

// FuzzLimiterReset: whatever the limit headers say, the limiter's reset
// is from now up to its bound.
func FuzzLimiterReset(f *testing.F) {
	f.Add("120", "", "")
	f.Add("-1", "2030-01-01T00:00:00Z", "6m0s")
	f.Add("Wed, 21 Oct 2099 07:28:00 GMT", "garbage", "-3h")
	f.Add("", "0001-01-01T00:00:00Z", "9223372036s")
	f.Fuzz(func(t *testing.T, retry, anthropic, xreset string) {
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": retry, "Anthropic-Ratelimit-Tokens-Reset": anthropic, "X-Ratelimit-Reset-Tokens": xreset} {
			if v != "" {
				h.Set(k, v)
			}
		}
		l := newLimiter(time.Hour, 4)
		l.maxReset = time.Hour
		before := time.Now()
		pass, err := l.acquire(context.Background(), callOf("a"))
		if err != nil {
			t.Fatal(err)
		}
		pass.done(529, h)
		g := l.gates[gateKey{"anthropic", "K"}]
		if g.until.Before(before) || g.until.After(time.Now().Add(time.Hour)) {
			t.Fatalf("%v: reset in %s", h, time.Until(g.until))
		}
	})
}

// A reset is kept in the store and held again by a limiter that loads
// it (a restarted daemon); passed ones are dropped, those past the bound
// cut to it, and a garbled file is ignored.
func TestResetKeptAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, limitsName)
	l := newLimiter(time.Hour, 64)
	l.load(path, nopLog())
	pass, _ := l.acquire(context.Background(), callOf("a"))
	pass.done(http.StatusTooManyRequests, http.Header{"Retry-After": {"600"}})
	until := l.gates[gateKey{"anthropic", "K"}].until
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the store: %v %v", info, err)
	}
	again := newLimiter(time.Hour, 64)
	again.load(path, nopLog())
	g := again.gates[gateKey{"anthropic", "K"}]
	if g == nil || !g.until.Equal(until) || g.attempt != 1 {
		t.Fatalf("after a restart: %+v, want the reset %s", g, until)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := again.acquire(ctx, callOf("b")); err == nil {
		t.Fatal("a call went out before the kept reset")
	}
	// Passed resets go, one too far off is cut to the bound.
	now := time.Now()
	os.WriteFile(path, []byte(`{"limits":[{"provider":"anthropic","account":"K","until":"`+now.Add(-time.Minute).Format(time.RFC3339Nano)+`"},`+
		`{"provider":"openai","account":"O","until":"9999-01-01T00:00:00Z","attempt":-4},{"provider":"","until":"9999-01-01T00:00:00Z"}]}`), 0o600)
	third := newLimiter(time.Hour, 64)
	third.maxReset = time.Hour
	third.load(path, nopLog())
	if _, ok := third.gates[gateKey{"anthropic", "K"}]; ok || len(third.gates) != 1 {
		t.Fatalf("gates after loading a passed reset: %v", third.gates)
	}
	if o := third.gates[gateKey{"openai", "O"}]; o.until.After(time.Now().Add(time.Hour)) || o.attempt != 0 {
		t.Fatalf("a reset in year 9999 loaded as %+v, want cut to 1h", o)
	}
	os.WriteFile(path, []byte("{not json"), 0o600)
	fourth := newLimiter(time.Hour, 64)
	fourth.load(path, nopLog())
	if len(fourth.gates) != 0 {
		t.Fatalf("a garbled store gave gates %v", fourth.gates)
	}
}

func nopLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
