package egress

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// A finished container's socket directory outlives Close: it is its bind
// mount's source, and the engine cannot read a stopped container whose
// mount source is gone. Remove (the container was removed) takes it.
func TestCloseKeepsTheDirectoryRemoveTakesIt(t *testing.T) {
	base, err := os.MkdirTemp("", "egress")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	svc := Service{Name: "proxy", Port: func() int { return 3128 }, Serve: func(ln net.Listener, _ contract.Sandbox) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			_ = c.Close()
		}
	}}
	s, err := NewSockets(filepath.Join(base, "net"), slog.New(slog.DiscardHandler), svc)
	if err != nil {
		t.Fatal(err)
	}
	sb := contract.Sandbox{Swarm: "s", Container: "c"}
	dir, err := s.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(sb)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("after Close: %v; want the directory kept", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "proxy.sock")); !os.IsNotExist(err) {
		t.Errorf("after Close the socket is still there (%v)", err)
	}
	s.Remove(sb)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v; want the directory gone", err)
	}
}

// OpenIn serves a sandbox in a directory made before it (a warm pool
// sandbox's, mounted at its create): the sockets appear there, Close takes
// them, Remove the directory; a directory outside the Sockets' own is
// refused.
func TestOpenInServesADirectoryMadeBefore(t *testing.T) {
	base, err := os.MkdirTemp("", "egress")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	svc := Service{Name: "proxy", Port: func() int { return 3128 }, Serve: func(ln net.Listener, _ contract.Sandbox) error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}}
	root := filepath.Join(base, "net")
	s, err := NewSockets(root, slog.New(slog.DiscardHandler), svc)
	if err != nil {
		t.Fatal(err)
	}
	sb := contract.Sandbox{Swarm: "s", Container: "c"}
	if _, err := s.OpenIn(sb, filepath.Join(base, "elsewhere")); err == nil {
		t.Fatal("a directory outside the sockets' own was taken")
	}
	pool := filepath.Join(root, "warm", "abc")
	if err := os.MkdirAll(pool, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := s.OpenIn(sb, pool)
	if err != nil || dir != pool {
		t.Fatalf("OpenIn: %q, %v; want %q", dir, err, pool)
	}
	if again, err := s.Open(sb); err != nil || again != pool {
		t.Errorf("Open of the open sandbox: %q, %v; want %q", again, err, pool)
	}
	c, err := net.Dial("unix", filepath.Join(pool, "proxy.sock"))
	if err != nil {
		t.Fatalf("the socket in the pool's directory: %v", err)
	}
	_ = c.Close()
	if _, err := os.Stat(s.Dir(sb)); !os.IsNotExist(err) {
		t.Errorf("the sandbox's own directory was made too (%v)", err)
	}
	s.Close(sb)
	if _, err := os.Stat(filepath.Join(pool, "proxy.sock")); !os.IsNotExist(err) {
		t.Errorf("after Close the socket is still there (%v)", err)
	}
	s.Remove(sb)
	if _, err := os.Stat(pool); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v; want the pool's directory gone", err)
	}
}

// RemoveIn takes the directory a sandbox was served in, named by the
// caller, when this Sockets never served it (a daemon restarted since the
// claim), and only under its own directory.
func TestRemoveInTakesANamedDirectoryUnderItsOwnOnly(t *testing.T) {
	base := t.TempDir()
	s, err := NewSockets(filepath.Join(base, "net"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pool, outside := filepath.Join(base, "net", "warm", "0a1b2c"), filepath.Join(base, "other")
	for _, d := range []string{pool, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.RemoveIn(contract.Sandbox{Swarm: "s", Container: "a"}, outside)
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("RemoveIn removed %s, outside its directory: %v", outside, err)
	}
	s.RemoveIn(contract.Sandbox{Swarm: "s", Container: "b"}, pool)
	if _, err := os.Stat(pool); !os.IsNotExist(err) {
		t.Errorf("RemoveIn left %s: %v", pool, err)
	}
}
