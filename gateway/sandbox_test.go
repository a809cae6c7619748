package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestSandboxSocketSaysWhoIsAsking: a container without a network reaches
// the gateway through a socket of its own; its placeholder works there
// only, not through another container's socket, not through a network
// listener, and not after Revoke.
func TestSandboxSocketSaysWhoIsAsking(t *testing.T) {
	f := newFixture(t, Limits{})
	sock := func(name string) string {
		p := filepath.Join(t.TempDir(), name+".sock")
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		go f.s.ServeSandbox(ln, contract.Sandbox{Swarm: "sw1", Container: name})
		t.Cleanup(func() { ln.Close() })
		return p
	}
	via := func(path string) *http.Client {
		return &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			TLSClientConfig: &tls.Config{RootCAs: f.pool},
		}}
	}
	a, b := sock("aimi-a"), sock("aimi-b")
	ga, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	base := ga.Env["ANTHROPIC_BASE_URL"]
	if base != "https://127.0.0.1:"+strconv.Itoa(SandboxPort)+"/anthropic" {
		t.Fatalf("base URL %q", base)
	}
	ph, body := ga.Env["ANTHROPIC_API_KEY"], `{"model":"m","messages":[]}`
	if resp := post(t, via(a), base, ph, body); resp.StatusCode != 200 {
		t.Errorf("own socket: %d, want 200", resp.StatusCode)
	}
	if resp := post(t, via(b), base, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another container's socket: %d, want 401", resp.StatusCode)
	}
	netBase := "https://127.0.0.1:" + strconv.Itoa(f.s.listen.Port("127.0.0.1")) + "/anthropic"
	if resp := post(t, f.client("127.0.0.1"), netBase, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("through a network listener: %d, want 401", resp.StatusCode)
	}
	f.s.Revoke(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"})
	if resp := post(t, via(a), base, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked: %d, want 401", resp.StatusCode)
	}
	checkNoSecret(t, f, ph)
}

// TestSandboxSocketCallsAreObservedOnce: a call through a container's own
// socket reaches the Observer as one through a network listener does,
// once, with its container and the answer's body (where the usage is).
func TestSandboxSocketCallsAreObservedOnce(t *testing.T) {
	f := newFixture(t, Limits{})
	close(f.up.next)
	p := filepath.Join(t.TempDir(), "models.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	go f.s.ServeSandbox(ln, contract.Sandbox{Swarm: "sw1", Container: "aimi-a"})
	t.Cleanup(func() { ln.Close() })
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", p)
		},
		TLSClientConfig: &tls.Config{RootCAs: f.pool},
	}}
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"model":"m","messages":[]}`, `{"model":"m","stream":true,"messages":[]}`} {
		resp := post(t, c, g.Env["ANTHROPIC_BASE_URL"], g.Env["ANTHROPIC_API_KEY"], body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d, want 200", body, resp.StatusCode)
		}
	}
	// The observer hears a call's end as the gateway closes the
	// upstream's answer, just after the sandbox read its last byte.
	var calls []Call
	testwait.Eventually(t, time.Minute, "the observer to hear 2 calls", func() error {
		f.rec.mu.Lock()
		calls = slices.Clone(f.rec.calls)
		f.rec.mu.Unlock()
		if len(calls) < 2 {
			return fmt.Errorf("observed %d calls: %+v", len(calls), calls)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	if len(calls) != 2 {
		t.Fatalf("observed %d calls, want 2: %+v", len(calls), calls)
	}
	for _, cl := range calls {
		if cl.Swarm != "sw1" || cl.Container != "aimi-a" || cl.Status != 200 || cl.Refused != "" || cl.ResponseBytes == 0 {
			t.Errorf("observed %+v", cl)
		}
	}
	f.rec.mu.Lock()
	seen := f.rec.body.String()
	f.rec.mu.Unlock()
	if !strings.Contains(seen, `"input_tokens":3`) || !strings.Contains(seen, "message_stop") {
		t.Errorf("the observer saw the bodies %q", seen)
	}
}
