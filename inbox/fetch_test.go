package inbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/nstest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// hostsResolver answers names from a map the test may change.
type hostsResolver struct {
	mu sync.Mutex
	m  map[string]netip.Addr
}

func (h *hostsResolver) set(name string, a netip.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[name] = a
}

func (h *hostsResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.m[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// fetchRig is the real egress proxy asking a real inbox, with grants in
// force as the daemon keeps them, for sandboxes the test opens.
type fetchRig struct {
	in       *Inbox
	proxy    *egress.Proxy
	grants   *egress.Grants
	res      *hostsResolver
	srv      string // HOST:PORT of the test server, by name
	hits     *atomic.Int64
	asked    atomic.Int64 // permission-requested events
	notes    *notes
	lastDeny atomic.Value
}

// newFetchRig serves "pkg.corp.test" from a network namespace of the
// test's own (a private address: the request says so, and a grant
// reaches it).
func newFetchRig(t *testing.T, wait time.Duration) *fetchRig {
	t.Helper()
	lan := nstest.New(t)
	ln := lan.Listen(t, 0)
	r := &fetchRig{hits: &atomic.Int64{}, notes: &notes{}, res: &hostsResolver{m: map[string]netip.Addr{"pkg.corp.test": lan.Addr}}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		r.hits.Add(1)
		_, _ = io.WriteString(w, "package")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.srv = fmt.Sprintf("pkg.corp.test:%d", nstest.Port(ln.Addr()))
	r.grants = egress.NewGrants(nil)
	r.in = New(Config{Journal: r.notes.journal, Grant: func(_ context.Context, g egress.Grant) { r.grants.Add(g) },
		Publish: func(e api.Event) {
			if e.Kind == api.EventPermissionRequested {
				r.asked.Add(1)
			}
		}})
	r.proxy = egress.NewProxy(egress.Options{Resolver: r.res, Asker: r.in, AskWait: func(contract.Sandbox) time.Duration { return wait },
		OnDeny: func(d egress.Denial) { r.lastDeny.Store(d.Reason) }})
	return r
}

// client opens sandbox sb at the proxy and returns its HTTP client.
func (r *fetchRig) client(t *testing.T, sb contract.Sandbox) *http.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = r.proxy.Serve(ln, sb, func() []egress.Rule { return r.grants.Rules(sb) }) }()
	pu, _ := url.Parse("http://" + ln.Addr().String())
	tr := &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 3 * time.Minute}
}

func status(c *http.Client, u string) (int, string) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTwentyContainersAskingForOneHostMakeOneRequest: twenty sandboxes of
// one swarm fetch from one host no rule allows, at once, through the real
// proxy: the inbox holds one request (kind fetch, "Reach HOST:PORT", the
// method and path without the query, twenty containers), a swarm answer
// lets every held connection through, a container of the swarm that asks
// afterwards goes through without a request, and one of another swarm is
// asked about anew.
func TestTwentyContainersAskingForOneHostMakeOneRequest(t *testing.T) {
	r := newFetchRig(t, 3*time.Minute)
	const n = 20
	codes := make(chan int, n)
	for i := range n {
		c := r.client(t, contract.Sandbox{Swarm: "sw", Container: fmt.Sprintf("aimi-%02d", i)})
		go func() {
			code, _ := status(c, "http://"+r.srv+"/simple/pkg/?token=SECRETQUERY")
			codes <- code
		}()
	}
	var req api.PermissionRequest
	testwait.Eventually(t, 2*time.Minute, "one request naming twenty containers", func() error {
		l := r.in.List("")
		if len(l) != 1 || len(l[0].Containers) != n {
			return fmt.Errorf("%d requests (%+v)", len(l), l)
		}
		req = l[0]
		return nil
	})
	if req.Kind != KindFetch || req.Title != "Reach "+r.srv || !strings.Contains(req.Command, "GET /simple/pkg/") {
		t.Errorf("request %+v: want kind fetch, title Reach %s, command GET /simple/pkg/", req, r.srv)
	}
	for _, s := range []string{req.Title, req.Command, r.notes.all()} {
		if strings.Contains(s, "SECRETQUERY") {
			t.Errorf("the query string is shown: %q", s)
		}
	}
	if !strings.Contains(req.Command, "private address") {
		t.Errorf("the request does not say the name resolves to a private address: %q", req.Command)
	}
	if got := r.asked.Load(); got != 1 {
		t.Errorf("%d permission-requested events, want 1", got)
	}
	if _, err := r.in.Answer(context.Background(), api.AnswerRequest{ID: req.ID, Option: egress.ScopeSwarm}); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case code := <-codes:
			if code != http.StatusOK {
				t.Errorf("a held connection got %d after the swarm answer, want 200", code)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the held connections were not released")
		}
	}
	late := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-late"})
	if code, body := status(late, "http://"+r.srv+"/again"); code != http.StatusOK {
		t.Errorf("a container of the swarm asking after the grant: %d %s, want 200", code, body)
	}
	if got := r.asked.Load(); got != 1 || len(r.in.List("")) != 0 {
		t.Errorf("after the grant: %d requests asked, %d pending; want 1 and 0", got, len(r.in.List("")))
	}
	if !strings.Contains(r.notes.all(), "egress granted: "+r.srv+" by a person, scope swarm") {
		t.Errorf("the grant is not journaled:\n%s", r.notes.all())
	}
	other := r.client(t, contract.Sandbox{Swarm: "sw2", Container: "aimi-00"})
	go func() { _, _ = status(other, "http://"+r.srv+"/") }()
	testwait.Eventually(t, time.Minute, "another swarm's container to be asked about", testwait.True(func() bool { return r.asked.Load() == 2 }))
}

// TestAskWaitEndsInARefusalAndTheRequestStays: nobody answers, so the
// connection is refused after egress.ask_wait, and the request stays: the
// next connection joins it, and a person's answer then lets it through.
func TestAskWaitEndsInARefusalAndTheRequestStays(t *testing.T) {
	r := newFetchRig(t, 500*time.Millisecond)
	c := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-a"})
	start := time.Now()
	code, body := status(c, "http://"+r.srv+"/x")
	if code != http.StatusForbidden || time.Since(start) < 500*time.Millisecond || !strings.Contains(body, "nobody answered within egress.ask_wait") {
		t.Fatalf("no answer: %d after %v: %s; want 403 after the wait", code, time.Since(start), body)
	}
	l := r.in.List("")
	if len(l) != 1 {
		t.Fatalf("%d requests pending after the wait, want 1", len(l))
	}
	done := make(chan int, 1)
	go func() { code, _ := status(c, "http://"+r.srv+"/y"); done <- code }()
	time.Sleep(100 * time.Millisecond) // the connection may or may not be held yet: either way it goes through
	if _, err := r.in.Answer(context.Background(), api.AnswerRequest{ID: l[0].ID, Option: egress.ScopeContainer}); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK && code != http.StatusForbidden {
		t.Errorf("the connection during the answer: %d", code)
	}
	if code, body := status(c, "http://"+r.srv+"/z"); code != http.StatusOK {
		t.Errorf("after a container answer: %d %s, want 200", code, body)
	}
	other := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-b"})
	if code, _ := status(other, "http://"+r.srv+"/z"); code != http.StatusForbidden {
		t.Errorf("another container after a container answer: %d, want 403 (asked anew, then the wait's end)", code)
	}
}

// TestNoAnswerReachesTheHostItself: a name resolving to this machine's
// loopback is refused at once, no request is made; a swarm grant of a
// name that later resolves there is refused all the same.
func TestNoAnswerReachesTheHostItself(t *testing.T) {
	r := newFetchRig(t, time.Minute)
	r.res.set("own.corp.test", netip.MustParseAddr("127.0.0.1"))
	c := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-a"})
	start := time.Now()
	if code, body := status(c, "http://own.corp.test:8080/"); code != http.StatusForbidden || !strings.Contains(body, "not asked") {
		t.Errorf("a name of the loopback: %d %s, want 403 not asked", code, body)
	}
	if time.Since(start) > 30*time.Second || len(r.in.List("")) != 0 {
		t.Errorf("a name of the loopback was asked about")
	}
	host, port, _ := net.SplitHostPort(r.srv)
	var p int
	_, _ = fmt.Sscan(port, &p)
	r.grants.Add(egress.Grant{Scope: egress.ScopeSwarm, Swarm: "sw", Host: host, Port: p, Private: true, By: "person"})
	if code, _ := status(c, "http://"+r.srv+"/"); code != http.StatusOK {
		t.Fatalf("granted host: %d, want 200", code)
	}
	r.res.set(host, netip.MustParseAddr("127.0.0.1"))
	if code, body := status(c, "http://"+r.srv+"/"); code != http.StatusForbidden || !strings.Contains(body, "loopback") {
		t.Errorf("granted host now on the loopback: %d %s, want 403", code, body)
	}
}

// TestARefusalIsRememberedForTheSwarm: after a person's reject the host
// is refused at once for the swarm's containers, without a new request.
func TestARefusalIsRememberedForTheSwarm(t *testing.T) {
	r := newFetchRig(t, time.Minute)
	c := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-a"})
	done := make(chan int, 1)
	go func() { code, _ := status(c, "http://"+r.srv+"/"); done <- code }()
	var id string
	testwait.Eventually(t, time.Minute, "a request", testwait.True(func() bool {
		l := r.in.List("")
		if len(l) == 1 {
			id = l[0].ID
		}
		return id != ""
	}))
	if _, err := r.in.Answer(context.Background(), api.AnswerRequest{ID: id, Option: "reject"}); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusForbidden {
		t.Errorf("rejected: %d, want 403", code)
	}
	c2 := r.client(t, contract.Sandbox{Swarm: "sw", Container: "aimi-b"})
	if code, body := status(c2, "http://"+r.srv+"/"); code != http.StatusForbidden || !strings.Contains(body, "refused it for this swarm") {
		t.Errorf("after a reject: %d %s", code, body)
	}
	if r.asked.Load() != 1 {
		t.Errorf("%d requests, want 1", r.asked.Load())
	}
}

// TestAnHTTPSTunnelIsAskedAboutToo: a CONNECT is held the same way; its
// request says it is a tunnel (no path to show), and an answer once
// opens the tunnel to the checked address.
func TestAnHTTPSTunnelIsAskedAboutToo(t *testing.T) {
	r := newFetchRig(t, 2*time.Minute)
	sb := contract.Sandbox{Swarm: "sw", Container: "aimi-a"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = r.proxy.Serve(ln, sb, func() []egress.Rule { return r.grants.Rules(sb) }) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", r.srv, r.srv)
	var req api.PermissionRequest
	testwait.Eventually(t, time.Minute, "the tunnel's request", func() error {
		l := r.in.List("")
		if len(l) != 1 {
			return fmt.Errorf("%d requests", len(l))
		}
		req = l[0]
		return nil
	})
	if !strings.HasPrefix(req.Command, "CONNECT (an HTTPS tunnel)") || req.Title != "Reach "+r.srv {
		t.Errorf("request %+v", req)
	}
	if _, err := r.in.Answer(context.Background(), api.AnswerRequest{ID: req.ID, Option: "allow"}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if !strings.Contains(string(buf[:n]), " 200 ") {
		t.Fatalf("after allow: %q, want the tunnel established", buf[:n])
	}
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: pkg.corp.test\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "package") {
		t.Errorf("through the tunnel: %q", b)
	}
	if g := r.grants.Of(sb); len(g) != 1 || g[0].Scope != egress.ScopeOnce {
		t.Errorf("grants after allow: %+v, want one of scope once", g)
	}
}

// TestAGrantIsInForceBeforeTheHeldConnectionGoes: a connection released
// by an answer is followed at once by the agent's next one to the same
// host; the grant must already be in force then, or that next connection
// is asked about again (a new request) or refused.
func TestAGrantIsInForceBeforeTheHeldConnectionGoes(t *testing.T) {
	grants := egress.NewGrants(nil)
	returned := make(chan struct{})
	in := New(Config{Grant: func(_ context.Context, g egress.Grant) {
		// Give a released Ask the time to return first, if it can.
		select {
		case <-returned:
		case <-time.After(2 * time.Second):
		}
		grants.Add(g)
	}})
	sb := contract.Sandbox{Swarm: "s1", Container: "aimi-a"}
	a := egress.Ask{Sandbox: sb, Method: "CONNECT", Host: "pkg.corp.test", Port: 443}
	got := make(chan egress.Verdict, 1)
	go func() {
		v, _ := in.Ask(context.Background(), a)
		got <- v
	}()
	var id string
	testwait.Eventually(t, time.Minute, "the request in the inbox", func() error {
		for _, r := range in.List("") {
			id = r.ID
			return nil
		}
		return fmt.Errorf("no request yet")
	})
	answered := make(chan error, 1)
	go func() {
		_, err := in.Answer(context.Background(), api.AnswerRequest{ID: id, Option: egress.ScopeSwarm})
		answered <- err
	}()
	v := <-got
	rules := grants.Rules(sb)
	close(returned)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if !v.Allow || len(rules) == 0 {
		t.Fatalf("released with %+v while the grants in force were %v: the next connection would be asked again", v, rules)
	}
}
