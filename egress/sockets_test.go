package egress

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
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
	svc := Service{Name: "proxy", Port: func() int { return 3128 }, Serve: func(ln net.Listener, _ Sandbox) error {
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
	sb := Sandbox{Swarm: "s", Container: "c"}
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
