package svclisten

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/daemonca"
)

// shellOwner is what a service around a Shell holds: its lock, and the
// addresses it last persisted.
type shellOwner struct {
	mu    sync.Mutex
	shell *Shell
	saved []Addresses
}

func newShell(t *testing.T) (*shellOwner, *x509.CertPool) {
	t.Helper()
	ca, _, err := daemonca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	o := &shellOwner{}
	o.shell = NewShell(Options{
		Name: "test service", Channel: contract.ServiceGit, Log: slog.New(slog.DiscardHandler),
		Lock: &o.mu, Cert: ca.ServerCert, Conns: NewConns("test service", 64, 64, nil),
		Persist: func() func() error {
			o.saved = append(o.saved, o.shell.SavedLocked())
			return func() error { return nil }
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sb, ok := SandboxOf(r.Context())
			if !ok {
				io.WriteString(w, "from a network")
				return
			}
			io.WriteString(w, sb.Swarm+"/"+sb.Container)
		}),
		IdleTimeout: time.Minute, MaxHeaderBytes: 4 << 10,
	})
	t.Cleanup(func() { o.shell.Close() })
	return o, pool
}

// After a restart the shell listens again on the former addresses the host
// still has (on the former port when free) and persists what it serves; a
// former address the host lost is dropped, not served.
func TestShellListensAgainOnFormerAddressesAndPersistsThem(t *testing.T) {
	o, _ := newShell(t)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	o.shell.Restore(Addresses{Port: port, IPs: []string{"192.0.2.77", "127.0.0.1"}})
	o.shell.Start(time.Hour)
	got := o.shell.Port("127.0.0.1")
	if got == 0 {
		t.Fatal("not listening on the former address 127.0.0.1")
	}
	if got != port {
		t.Logf("former port %d was taken meanwhile; listening on %d", port, got)
	}
	o.mu.Lock()
	saved, last := slices.Clone(o.saved), o.shell.LastLocked()
	o.mu.Unlock()
	if len(saved) != 1 || !slices.Equal(saved[0].IPs, []string{"127.0.0.1"}) || saved[0].Port != got {
		t.Errorf("persisted %+v, want once port %d on [127.0.0.1]", saved, got)
	}
	if last != "127.0.0.1" {
		t.Errorf("last address %q, want 127.0.0.1", last)
	}
	if err := o.shell.ListenOn(t.Context(), "127.0.0.1"); err != nil || len(o.saved) != 1 {
		t.Errorf("ListenOn again: %v, persisted %d times; want nothing done", err, len(o.saved))
	}
}

// A sandbox's own socket answers over TLS for 127.0.0.1 and tells the
// handler whose socket it is; Close ends its server, and afterwards
// neither a socket nor an address is served.
func TestShellServesASandboxUntilClose(t *testing.T) {
	o, pool := newShell(t)
	sock := t.TempDir() + "/git.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- o.shell.ServeSandbox(ln, contract.Sandbox{Swarm: "s1", Container: "c1"}) }()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("https://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "s1/c1" {
		t.Errorf("the handler heard %q, want the socket's sandbox s1/c1", body)
	}
	if err := o.shell.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeSandbox ended with %v, want http.ErrServerClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the sandbox's server")
	}
	ln2, err := net.Listen("unix", t.TempDir()+"/again.sock")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.shell.ServeSandbox(ln2, contract.Sandbox{Swarm: "s1", Container: "c2"}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ServeSandbox after Close: %v, want net.ErrClosed", err)
	}
	if err := o.shell.ListenOn(t.Context(), "127.0.0.1"); err == nil {
		t.Error("ListenOn after Close succeeded")
	}
}

// Close returns only after a sweep's write of the addresses it staged:
// an owner reading its state file after Close (a daemon's next start)
// must not find an address the sweep had already dropped.
func TestCloseWaitsForASweepsWrite(t *testing.T) {
	staged, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	h := NewShell(Options{Name: "test service", Channel: contract.ServiceGit, Log: slog.New(slog.DiscardHandler),
		Lock: &mu, Conns: NewConns("test service", 4, 4, nil),
		Persist: func() func() error {
			return func() error {
				once.Do(func() { close(staged) })
				<-release
				return nil
			}
		}})
	// An address no interface of the host holds (TEST-NET-1, never dialled):
	// the first sweep drops it and stages a write.
	_, subnet, _ := net.ParseCIDR("192.0.2.0/24")
	h.set.listeners["192.0.2.1"] = &listener{srv: &http.Server{}, subnet: subnet, done: make(chan struct{})}
	h.set.ips["192.0.2.1"] = true
	h.Start(5 * time.Millisecond)
	select {
	case <-staged:
	case <-time.After(10 * time.Second):
		t.Fatal("no sweep dropped the gone address")
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
		close(release)
		t.Fatal("Close returned while the sweep's write was still under way")
	case <-time.After(300 * time.Millisecond):
		// Close is still waiting: let the write end, then Close must.
		close(release)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the sweep's write ended")
	}
}
