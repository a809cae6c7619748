package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// limitedUpstream answers 429 with retry-after to its first call, 200 to
// the others, and records when each call arrived and from whom.
type limitedUpstream struct {
	retryAfter string
	mu         sync.Mutex
	arrivals   []arrival
	hold       chan struct{} // when set, a 200 waits for it
	inflight   atomic.Int32
	maxSeen    atomic.Int32
}

type arrival struct {
	from string
	at   time.Time
}

func (u *limitedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.inflight.Add(1)
	defer u.inflight.Add(-1)
	for {
		m := u.maxSeen.Load()
		if n <= m || u.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	u.mu.Lock()
	first := len(u.arrivals) == 0
	u.arrivals = append(u.arrivals, arrival{r.Header.Get("X-Container"), time.Now()})
	u.mu.Unlock()
	if first && u.retryAfter != "" {
		w.Header().Set("Retry-After", u.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if u.hold != nil {
		<-u.hold
	}
	io.WriteString(w, "ok")
}

// front is the gateway's handling of a call, reduced to the limiter: it
// waits in acquire, forwards to up, and ends the call with the answer.
func front(t *testing.T, l *limiter, up string, maxConc int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Header.Get("X-Container")
		pass, err := l.acquire(r.Context(), caller{provider: "anthropic", account: "ANTHROPIC_API_KEY", who: who{Swarm: "sw", Container: c}, maxConcurrent: maxConc})
		if err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, up, nil)
		req.Header.Set("X-Container", c)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			pass.done(http.StatusBadGateway, nil)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		pass.done(resp.StatusCode, resp.Header)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func callGW(ctx context.Context, url, container string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	req.Header.Set("X-Container", container)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestLimitedProviderHoldsOtherCallsUntilReset(t *testing.T) {
	up := &limitedUpstream{retryAfter: "2"}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	l := newLimiter(5*time.Minute, 64)
	gw := front(t, l, upSrv.URL, 0)
	ctx := context.Background()
	// Container a's first call is limited; the provider said 2 s.
	st, err := callGW(ctx, gw.URL, "a")
	if err != nil || st != http.StatusTooManyRequests {
		t.Fatalf("first call: %d %v, want 429", st, err)
	}
	limitedAt := time.Now()
	// Both containers call again at once: neither reaches the provider
	// before the reset, and both get through after it.
	var wg sync.WaitGroup
	for _, c := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := callGW(ctx, gw.URL, c); err != nil || st != http.StatusOK {
				t.Errorf("container %s after the limit: %d %v, want 200", c, st, err)
			}
		}()
	}
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.arrivals) != 3 {
		t.Fatalf("the provider saw %d calls, want 3 (one limited, one per container after the reset)", len(up.arrivals))
	}
	for _, a := range up.arrivals[1:] {
		// The reset is 2 s after the 429; allow for the clock of the
		// answer's arrival, not less than 1.5 s.
		if a.at.Sub(limitedAt) < 1500*time.Millisecond {
			t.Errorf("container %s reached the provider %s after the limit, before its reset", a.from, a.at.Sub(limitedAt))
		}
	}
}

func TestMaxConcurrentSerialisesFairly(t *testing.T) {
	up := &limitedUpstream{hold: make(chan struct{})}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	l := newLimiter(5*time.Minute, 64)
	gw := front(t, l, upSrv.URL, 1)
	ctx := context.Background()
	var wg sync.WaitGroup
	start := func(c string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := callGW(ctx, gw.URL, c); err != nil || st != http.StatusOK {
				t.Errorf("container %s: %d %v", c, st, err)
			}
		}()
	}
	// a's first call holds the one place; a queues three more, then b one:
	// b must go right after a's first waiting call, not after all of a's.
	start("a")
	testwait.Eventually(t, time.Minute, "a's first call at the provider", func() error {
		if n := up.inflight.Load(); n != 1 {
			return fmt.Errorf("%d calls at the provider", n)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	for i := range 3 {
		start("a")
		waitQueuedN(t, l, i+1)
	}
	start("b")
	waitQueuedN(t, l, 4)
	for range 5 {
		up.hold <- struct{}{}
	}
	wg.Wait()
	if m := up.maxSeen.Load(); m != 1 {
		t.Errorf("%d calls in flight at once at the provider, want 1 (max_concurrent 1)", m)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	var order []string
	for _, a := range up.arrivals {
		order = append(order, a.from)
	}
	if len(order) != 5 || order[2] != "b" {
		t.Errorf("calls reached the provider in the order %v, want b third (round-robin between containers)", order)
	}
}

func TestCancelledWaitReturnsPromptly(t *testing.T) {
	l := newLimiter(2*time.Hour, 64)
	pass, err := l.acquire(context.Background(), callOf("a"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Retry-After": {"3600"}}
	pass.done(http.StatusTooManyRequests, h)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := l.acquire(ctx, callOf("b"))
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		var we *WaitError
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrLimitWait) || !errors.As(err, &we) || we.Until.IsZero() {
			t.Fatalf("cancelled wait: %v, want a WaitError with the reset and context.Canceled", err)
		}
		t.Log(err)
	case <-time.After(time.Minute):
		t.Fatal("a cancelled wait did not return")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.gates[gateKey{"anthropic", "K"}]; g.queued != 0 || len(g.order) != 0 {
		t.Errorf("the cancelled call is still queued: %d", g.queued)
	}
	// A reset past the wait bound is refused at once, with the reset.
	short := newLimiter(time.Minute, 64)
	d, _ := short.acquire(context.Background(), callOf("a"))
	d.done(529, h)
	if _, err := short.acquire(context.Background(), callOf("b")); !errors.Is(err, ErrLimitWait) {
		t.Errorf("a reset in an hour with a 1m bound: %v, want ErrLimitWait at once", err)
	}
}

// TestGatewayHoldsCallsOfTwoContainersUntilReset runs the same through
// the gateway itself: two containers, one key, a provider limited once.
func TestGatewayHoldsCallsOfTwoContainersUntilReset(t *testing.T) {
	f := newFixture(t, Limits{})
	up := &limitedUpstream{retryAfter: "2"}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	a := f.s.providers["anthropic"]
	a.URL, _ = ParseURL(upSrv.URL)
	f.s.providers["anthropic"] = a
	send := func(container, from string, g Grant) int {
		req, _ := http.NewRequest(http.MethodPost, g.Env["ANTHROPIC_BASE_URL"]+"/v1/messages", strings.NewReader(`{}`))
		req.Header.Set("X-Api-Key", g.Env["ANTHROPIC_API_KEY"])
		req.Header.Set("X-Container", container)
		resp, err := f.client(from).Do(req)
		if err != nil {
			t.Errorf("%s: %v", container, err)
			return 0
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	ga, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-b"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if st := send("a", "127.0.0.1", ga); st != http.StatusTooManyRequests {
		t.Fatalf("first call: %d, want the provider's 429", st)
	}
	limitedAt := time.Now()
	var wg sync.WaitGroup
	for _, c := range []struct {
		name, from string
		g          Grant
	}{{"a", "127.0.0.1", ga}, {"b", "127.0.0.2", gb}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st := send(c.name, c.from, c.g); st != http.StatusOK {
				t.Errorf("container %s after the limit: %d, want 200", c.name, st)
			}
		}()
	}
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.arrivals) != 3 {
		t.Fatalf("the provider saw %d calls, want 3", len(up.arrivals))
	}
	for _, ar := range up.arrivals[1:] {
		if ar.at.Sub(limitedAt) < 1500*time.Millisecond {
			t.Errorf("container %s reached the provider %s after the limit, before its reset", ar.from, ar.at.Sub(limitedAt))
		}
	}
}

// callOf is a call of container c to anthropic with key K and no bounds.
func callOf(c string) caller {
	return caller{provider: "anthropic", account: "K", who: who{Swarm: "sw", Container: c}}
}
