package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
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
		go f.s.ServeSandbox(ln, "sw1", name)
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
	ga, err := f.s.Grant("sw1", "aimi-a", "")
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
	netBase := "https://127.0.0.1:" + strconv.Itoa(f.s.listeners["127.0.0.1"].port) + "/anthropic"
	if resp := post(t, f.client("127.0.0.1"), netBase, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("through a network listener: %d, want 401", resp.StatusCode)
	}
	f.s.Revoke("sw1", "aimi-a")
	if resp := post(t, via(a), base, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked: %d, want 401", resp.StatusCode)
	}
	checkNoSecret(t, f, ph)
}
