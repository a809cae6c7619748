package egress

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aimi-tools/swarm/internal/nstest"
)

// Every IPv6 form that can carry an IPv4 address is judged by the address
// it carries: the loopback, link-local and metadata addresses stay inward
// however they are written, a private one stays private.
func TestReachOfJudgesTheIPv4AddressAnIPv6FormCarries(t *testing.T) {
	for addr, want := range map[string]reach{
		"::127.0.0.1":                  inward, // IPv4-compatible
		"::169.254.169.254":            inward, // IPv4-compatible metadata
		"::ffff:127.0.0.1":             inward, // IPv4-mapped
		"::ffff:0:127.0.0.1":           inward, // IPv4-translated (SIIT)
		"64:ff9b::127.0.0.1":           inward, // NAT64
		"64:ff9b::a9fe:a9fe":           inward, // NAT64 of 169.254.169.254
		"64:ff9b:1::7f00:1":            inward, // NAT64 for local use
		"2002:7f00:1::1":               inward, // 6to4 of 127.0.0.1
		"2002:a9fe:a9fe::1":            inward, // 6to4 of the metadata address
		"2001:0:7f00:1::1":             inward, // Teredo, server 127.0.0.1
		"2001:0:102:304:0:0:80ff:fffe": inward, // Teredo, client 127.0.0.1 (inverted)
		"::10.1.2.3":                   private,
		"64:ff9b::10.1.2.3":            private,
		"2002:a01:203::1":              private,
		"64:ff9b::1.2.3.4":             outside,
		"2002:102:304::1":              outside,
		"2001:0:102:304::fefd:fcfb":    outside, // Teredo 1.2.3.4 / 1.2.3.4
		"2606:4700::1111":              outside,
		"1.2.3.4":                      outside,
		"10.0.0.7":                     private,
		"fd00::7":                      private,
		"169.254.169.254":              inward,
		"fe80::1":                      inward,
	} {
		if got := reachOf(netip.MustParseAddr(addr), nil, nil); got != want {
			t.Errorf("%s: reach %d, want %d", addr, got, want)
		}
	}
}

// A name the user wrote into egress.allow that resolves into a private
// range (a company's server on its LAN: a test host in a network namespace
// on 10.x) is reached through the proxy; the same name in a rule the user
// did not write (a repository's) is refused, and this machine's own
// addresses, loopback, link-local addresses (the namespace's own: were
// one dialled, it would arrive there, not leave the machine), IPv6 forms
// of the loopback and the engine's networks stay refused for the user's
// rules too; nothing of theirs arrives at the namespace's server.
func TestProxyReachesAPrivateAddressOfAHostTheUserNamed(t *testing.T) {
	lan := nstest.New(t)
	ln := lan.Listen(t, 0)
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "company")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := strconv.Itoa(nstest.Port(ln.Addr()))
	names := fakeResolver{"git.corp.test": lan.Addr.String(), "repo.corp.test": lan.Addr.String(),
		"peer.corp.test": lan.Peer.String(), "loop.corp.test": "127.0.0.1", "meta.corp.test": lan.LinkLocal.String(),
		"compat.corp.test": "::127.0.0.1", "link.corp.test": "fe80::1"}
	refused := []string{"peer.corp.test", "loop.corp.test", "meta.corp.test", "compat.corp.test", "link.corp.test"}
	if nets := engineNets(); len(nets) > 0 {
		names["engine.corp.test"] = nets[0].Addr().Next().Next().String()
		refused = append(refused, "engine.corp.test")
	} else {
		t.Log("this machine has no bridge: the engine's networks are not tried")
	}
	var rules []Rule
	for name := range names {
		r, err := ParseRule(name + ":" + port)
		if err != nil {
			t.Fatal(err)
		}
		if name != "repo.corp.test" {
			r = r.UserNamed()
		}
		rules = append(rules, r)
	}
	rig := startProxyRules(t, names, rules)
	get := func(name string) (int, string) {
		resp, err := rig.client.Get("http://" + name + ":" + port + "/")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := get("git.corp.test"); code != 200 || body != "company" {
		t.Errorf("the company's server the user named (%s): %d %q", lan.Addr, code, body)
	}
	if code, body := get("repo.corp.test"); code != http.StatusForbidden || !strings.Contains(body, "private") {
		t.Errorf("a repository's rule reached the private address: %d %q", code, body)
	}
	for _, name := range refused {
		if code, body := get(name); code != http.StatusForbidden {
			t.Errorf("%s (%s): %d %q, want 403", name, names[name], code, body)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the namespace's server answered %d requests, want 1 (the allowed one)", n)
	}
}
