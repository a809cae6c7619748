package nstest

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// NamePrefix starts the name of every namespace this package makes:
// NamePrefix, the making process's pid, '-', a sequence number.
const NamePrefix = "aimitest-"

// netnsDir is where iproute2 keeps named namespaces.
const netnsDir = "/run/netns"

// pool is where the hosts' /30 networks are picked: private, and far from
// the engine's default pools (172.17.0.0/16 and up, 192.168.0.0/16) and
// Swarm mode's (10.0.0.0/8 counted from its start).
var pool = netip.MustParsePrefix("10.213.0.0/16")

var seq atomic.Int64

// Host is a network namespace of the test's own with one address.
type Host struct {
	Name string     // the namespace's name (ip netns)
	Addr netip.Addr // its address, which this machine routes to
	// Peer is this machine's end of the veth pair: one of the host's own
	// addresses from then on.
	Peer   netip.Addr
	Prefix netip.Prefix // the pair's network
	// LinkLocal is a second address of the namespace, in 169.254.0.0/16
	// (never 169.254.169.0/24): it stands in for a link-local or metadata
	// address, reached from this machine through the pair.
	LinkLocal netip.Addr
	path      string
}

// New makes a namespace with a veth pair to this machine on a free /30
// of pool, its loopback up and no other route (it answers this machine and
// what this machine forwards, and reaches nothing beyond); it goes when t ends (after t's other cleanups
// registered later, so listeners in it close first).
func New(t testing.TB) *Host {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("nstest: iproute2's ip is not installed: %v (apt-get install iproute2)", err)
	}
	RemoveLeftovers()
	h := &Host{Name: NamePrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(seq.Add(1), 10)}
	h.path = filepath.Join(netnsDir, h.Name)
	if out, err := exec.Command("ip", "netns", "add", h.Name).CombinedOutput(); err != nil {
		t.Fatalf("nstest: ip netns add %s: %v: %s (the tests need root: CAP_NET_ADMIN and CAP_SYS_ADMIN)", h.Name, err, out)
	}
	t.Cleanup(func() { h.remove(t) })
	var err error
	for range 8 {
		if err = h.link(); err == nil {
			return h
		}
	}
	t.Fatalf("nstest: join %s to this machine: %v", h.Name, err)
	return nil
}

// link picks a /30 no route of this machine covers and makes the pair.
func (h *Host) link() error {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	base := pool.Addr().As4()
	off := binary.BigEndian.Uint32(b[:]) & (1<<(32-pool.Bits()) - 1) &^ 3
	var a [4]byte
	n := binary.BigEndian.Uint32(base[:]) + off
	binary.BigEndian.PutUint32(a[:], n)
	h.Prefix = netip.PrefixFrom(netip.AddrFrom4(a), 30)
	h.Peer = h.Prefix.Addr().Next()
	h.Addr = h.Peer.Next()
	third := 1 + b[2]%254
	if third == 169 {
		third = 170
	}
	h.LinkLocal = netip.AddrFrom4([4]byte{169, 254, third, b[3]})
	for _, p := range []netip.Prefix{h.Prefix, netip.PrefixFrom(h.LinkLocal, 32)} {
		if taken, err := routed(p); err != nil || taken {
			return fmt.Errorf("%s is routed already (%v)", p, err)
		}
	}
	id := hex.EncodeToString(b[:])
	outer, inner := "ait"+id+"o", "ait"+id+"i" // at most 15 bytes, the kernel's limit
	steps := [][]string{
		{"link", "add", outer, "type", "veth", "peer", "name", inner, "netns", h.Name},
		{"addr", "add", netip.PrefixFrom(h.Peer, 30).String(), "dev", outer},
		{"link", "set", outer, "up"},
		{"-n", h.Name, "addr", "add", netip.PrefixFrom(h.Addr, 30).String(), "dev", inner},
		{"-n", h.Name, "link", "set", inner, "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
		{"-n", h.Name, "addr", "add", netip.PrefixFrom(h.LinkLocal, 32).String(), "dev", inner},
		{"route", "add", netip.PrefixFrom(h.LinkLocal, 32).String(), "dev", outer},
	}
	for i, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			if i > 0 {
				_ = exec.Command("ip", "link", "del", outer).Run()
			}
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// routed reports whether a route of this machine's main table overlaps p.
func routed(p netip.Prefix) (bool, error) {
	out, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst := f[0]
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if q, err := netip.ParsePrefix(dst); err == nil && q.Overlaps(p) {
			return true, nil
		}
	}
	return false, nil
}

// remove deletes the namespace (its end of the pair with it, and so the
// other end).
func (h *Host) remove(t testing.TB) {
	if out, err := exec.Command("ip", "netns", "del", h.Name).CombinedOutput(); err != nil {
		t.Errorf("nstest: remove %s: %v: %s (remove it with ip netns del %s)", h.Name, err, out, h.Name)
	}
}

// Do runs fn on a thread of its own inside the namespace; sockets fn
// opens stay there. The thread is thrown away afterwards, so no other
// goroutine ever runs in the namespace.
func (h *Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends the thread with the goroutine.
		runtime.LockOSThread()
		f, err := os.Open(h.path)
		if err != nil {
			errc <- fmt.Errorf("nstest: open %s: %w", h.path, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), syscall.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("nstest: enter %s: %w", h.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Listen listens for TCP on port (0: any) at every address of the
// namespace (Addr and LinkLocal); the listener closes when t ends.
func (h *Host) Listen(t testing.TB, port int) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp4", ":"+strconv.Itoa(port))
		return err
	}); err != nil {
		t.Fatalf("nstest: listen in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// ListenPacket listens for UDP on port (0: any) at every address of the
// namespace; it closes when t ends.
func (h *Host) ListenPacket(t testing.TB, port int) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := h.Do(func() (err error) {
		pc, err = net.ListenPacket("udp4", ":"+strconv.Itoa(port))
		return err
	}); err != nil {
		t.Fatalf("nstest: listen for UDP in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

// RemoveLeftovers deletes the namespaces of this package whose process is
// gone (a test binary killed before its cleanup ran).
func RemoveLeftovers() {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := ownerPID(e.Name())
		if !ok || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}

// ownerPID reads the pid out of a name this package gave.
func ownerPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, NamePrefix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	return pid, ok && err == nil && pid > 0
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Port is the port a listener of Listen or ListenPacket has.
func Port(a net.Addr) int {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.Port
	case *net.UDPAddr:
		return a.Port
	}
	return 0
}
