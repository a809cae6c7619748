package nstest

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A host in a namespace is reached from this machine at its address, its
// listener lives in the namespace (not on this machine's addresses), and
// the namespace is gone after the test.
func TestHostIsReachedAtItsAddressAndRemoved(t *testing.T) {
	var name string
	t.Run("host", func(t *testing.T) {
		h := New(t)
		name = h.Name
		ln := h.Listen(t, 0)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, "inside")
				_ = c.Close()
			}
		}()
		port := Port(ln.Addr())
		for _, a := range []string{h.Addr.String(), h.LinkLocal.String()} {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(a, strconv.Itoa(port)), 5*time.Second)
			if err != nil {
				t.Fatalf("dial the host in %s at %s: %v", h.Name, a, err)
			}
			b, _ := io.ReadAll(c)
			_ = c.Close()
			if string(b) != "inside" {
				t.Fatalf("read %q from %s", b, a)
			}
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
			_ = c.Close()
			t.Errorf("the namespace's listener answers on this machine's loopback")
		}
		pc := h.ListenPacket(t, 0)
		c, err := net.Dial("udp", net.JoinHostPort(h.Addr.String(), strconv.Itoa(Port(pc.LocalAddr()))))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte("x"))
		_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := pc.ReadFrom(make([]byte, 8)); err != nil {
			t.Errorf("no UDP packet arrived in %s: %v", h.Name, err)
		}
	})
	if _, err := os.Stat(filepath.Join(netnsDir, name)); !os.IsNotExist(err) {
		t.Errorf("namespace %s is left after its test: %v", name, err)
	}
}

func TestOwnerPIDReadsOnlyThisPackagesNames(t *testing.T) {
	for name, want := range map[string]int{"aimitest-42-1": 42, "aimitest-x-1": 0, "other-42-1": 0, "aimitest-42": 0} {
		if pid, ok := ownerPID(name); pid != want && ok || ok != (want != 0) {
			t.Errorf("%s: %d %v, want %d", name, pid, ok, want)
		}
	}
}
