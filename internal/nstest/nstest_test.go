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
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("dial the host in %s: %v", h.Name, err)
		}
		b, _ := io.ReadAll(c)
		_ = c.Close()
		if string(b) != "inside" {
			t.Fatalf("read %q", b)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
			_ = c.Close()
			t.Errorf("the namespace's listener answers on this machine's loopback")
		}
		pc := h.ListenPacket(t, 0)
		if pc.LocalAddr().(*net.UDPAddr).IP.String() != h.Addr.String() {
			t.Errorf("UDP listens at %s, want %s", pc.LocalAddr(), h.Addr)
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
