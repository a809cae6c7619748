package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/nstest"
)

// fakeResolver answers every name with one address.
type fakeResolver map[string]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type proxyRig struct {
	client  *http.Client
	mu      sync.Mutex
	denials []Denial
}

func (r *proxyRig) denied() []Denial {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Denial(nil), r.denials...)
}

func startProxy(t *testing.T, res Resolver, allow ...string) *proxyRig {
	t.Helper()
	rules, err := ParseRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	return startProxyRules(t, res, rules)
}

func startProxyRules(t *testing.T, res Resolver, rules []Rule) *proxyRig {
	t.Helper()
	rig := &proxyRig{}
	p := NewProxy(Options{Resolver: res, OnDeny: func(d Denial) {
		rig.mu.Lock()
		rig.denials = append(rig.denials, d)
		rig.mu.Unlock()
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		_ = p.Serve(ln, contract.Sandbox{Swarm: "s", Container: "aimi-probe"}, func() []Rule { return rules })
	}()
	pu, _ := url.Parse("http://" + ln.Addr().String())
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	t.Cleanup(tr.CloseIdleConnections)
	rig.client = &http.Client{Transport: tr}
	return rig
}

func TestProxyForwardsToAnAddressARuleNames(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello "+r.URL.Path) }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	rig := startProxy(t, fakeResolver{}, host)
	resp, err := rig.client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello /x" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

func TestProxyTunnelsHTTPSToAnAllowedAddress(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secure") }))
	defer srv.Close()
	rig := startProxy(t, fakeResolver{}, strings.TrimPrefix(srv.URL, "https://"))
	tr := rig.client.Transport.(*http.Transport)
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	resp, err := rig.client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "secure" {
		t.Fatalf("%q", body)
	}
}

func TestProxyRefusesAndReports(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("reached: %s", r.URL) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	// rebind.example is allowed by name but resolves to the loopback: a
	// rule naming a name never reaches the host. meta.example resolves to
	// a link-local address of a namespace of the test's own, which stands
	// in for the metadata address.
	meta := nstest.New(t)
	rig := startProxy(t, fakeResolver{"rebind.example": "127.0.0.1", "meta.example": meta.LinkLocal.String()},
		"rebind.example:"+port, "meta.example:"+port, "GET allowed.example/ok/")
	for _, u := range []string{
		"http://rebind.example:" + port + "/",
		"http://meta.example:" + port + "/",
		"http://127.0.0.1:" + port + "/",
		"http://notlisted.example/",
		"http://allowed.example/other",
	} {
		resp, err := rig.client.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", u, resp.StatusCode)
		}
	}
	resp, err := rig.client.Post("http://allowed.example/ok/x", "text/plain", strings.NewReader("x"))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST to a GET-only rule: %d", resp.StatusCode)
		}
	}
	if _, err := rig.client.Get("https://notlisted.example/"); err == nil {
		t.Error("CONNECT to a name no rule allows succeeded")
	}
	d := rig.denied()
	if len(d) != 7 {
		t.Fatalf("denials %+v, want 7", d)
	}
	if d[0].Host != "rebind.example" || d[0].Method != "GET" || d[0].Container != "aimi-probe" || !strings.Contains(d[0].Reason, "loopback") {
		t.Errorf("first denial %+v", d[0])
	}
	if last := d[6]; last.Method != "CONNECT" || last.Port != 443 {
		t.Errorf("last denial %+v", last)
	}
}

// A name resolving to an IPv6 form of the loopback or the metadata
// address (IPv4-compatible, NAT64, 6to4, Teredo, IPv4-translated) is
// refused like the IPv4 address it carries, never dialled.
func TestProxyRefusesIPv6FormsOfInwardAddresses(t *testing.T) {
	names := fakeResolver{"compat.test": "::127.0.0.1", "nat64.test": "64:ff9b::7f00:1",
		"sixtofour.test": "2002:7f00:1::1", "teredo.test": "2001:0:7f00:1::1", "siit.test": "::ffff:0:7f00:1"}
	var allow []string
	for name := range names {
		allow = append(allow, name)
	}
	rig := startProxy(t, names, allow...)
	for name, addr := range names {
		resp, err := rig.client.Get("http://" + name + "/")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s (%s): %d %q, want 403 (refused, not dialled)", name, addr, resp.StatusCode, b)
		}
	}
}
