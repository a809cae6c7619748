package gitserve

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestSandboxSocketSaysWhoIsAsking: a token works through its own
// container's socket only (all sockets' connections come from the same
// place, so no address tells them apart), and not after Revoke; the
// refusal is logged without the token.
func TestSandboxSocketSaysWhoIsAsking(t *testing.T) {
	s, logs := newService(t, Options{})
	ctx := ctxT(t)
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	repo := newRepo(t)
	grant := func(name string) Grant {
		g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: name, Branch: "feat-" + name}, "")
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	sock := func(name string) string {
		p := filepath.Join(t.TempDir(), name+".sock")
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		go s.ServeSandbox(ln, contract.Sandbox{Swarm: "sw1", Container: name})
		t.Cleanup(func() { ln.Close() })
		return p
	}
	ga, gb := grant("aimi-a"), grant("aimi-b")
	a, b := sock("aimi-a"), sock("aimi-b")
	pool := caPool(t, ga.CAFile)
	get := func(path, token string) int {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:1/sw1.git/info/refs?service=git-upload-pack", nil)
		req.SetBasicAuth("x", token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(a, ga.Token); got != http.StatusOK {
		t.Errorf("own token through own socket: %d, want 200", got)
	}
	if got := get(b, ga.Token); got != http.StatusUnauthorized {
		t.Errorf("a's token through b's socket: %d, want 401", got)
	}
	if got := get(b, gb.Token); got != http.StatusOK {
		t.Errorf("b's own token after a's was refused there: %d, want 200", got)
	}
	s.Revoke(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"})
	if got := get(a, ga.Token); got != http.StatusUnauthorized {
		t.Errorf("revoked token through its own socket: %d, want 401", got)
	}
	if !strings.Contains(logs.String(), "git token used from outside its container refused") {
		t.Errorf("the refusal is not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), ga.Token) || strings.Contains(logs.String(), gb.Token) {
		t.Error("the log holds a token")
	}
}
