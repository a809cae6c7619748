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
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/daemonca"
)

func newSet(t *testing.T, conns *Conns) (*Set, *x509.CertPool) {
	t.Helper()
	ca, _, err := daemonca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	s := New(Options{
		Name: "test service", Log: slog.New(slog.DiscardHandler), Cert: ca.ServerCert, Conns: conns,
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		IdleTimeout: time.Minute, MaxHeaderBytes: 4 << 10,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Detach()(ctx)
	})
	return s, pool
}

// A listener on a loopback address answers over TLS with a certificate for
// it, keeps its port as the preferred one and is found again by Listen.
func TestListenServesTLSAndKeepsThePort(t *testing.T) {
	s, pool := newSet(t, NewConns("test service", 8, 8, slog.New(slog.DiscardHandler)))
	ip, changed, err := s.Listen(t.Context(), "127.0.0.1")
	if err != nil || !changed || ip != "127.0.0.1" {
		t.Fatalf("Listen = %q, %v, %v", ip, changed, err)
	}
	port := s.Port(ip)
	if port == 0 || s.PreferredPort() != port {
		t.Fatalf("port %d, preferred %d", port, s.PreferredPort())
	}
	if _, changed, err := s.Listen(t.Context(), "127.0.0.1"); err != nil || changed {
		t.Fatalf("Listen again = %v, %v; want nothing done", changed, err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := s.Addrs(); len(got) != 1 || got[0] != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("Addrs = %v", got)
	}
	if !s.Stop(ip, "test") || s.Port(ip) != 0 || len(s.IPs()) != 0 {
		t.Errorf("after Stop: port %d, IPs %v", s.Port(ip), s.IPs())
	}
}

// An address the host does not have, or no address at all, is refused.
func TestListenRefusesWhatIsNotAHostAddress(t *testing.T) {
	s, _ := newSet(t, NewConns("test service", 8, 8, slog.New(slog.DiscardHandler)))
	for _, ip := range []string{"not-an-ip", "192.0.2.77"} {
		if _, _, err := s.Listen(t.Context(), ip); err == nil {
			t.Errorf("Listen(%q) succeeded", ip)
		}
	}
}

// Connections past the limit of one source are closed as they are
// accepted, and a closed one gives its place back once.
func TestConnsHoldOnlyTheirShare(t *testing.T) {
	conns := NewConns("test service", 4, 2, slog.New(slog.DiscardHandler))
	if !conns.Admit("a") || !conns.Admit("a") {
		t.Fatal("first two of a refused")
	}
	if conns.Admit("a") {
		t.Fatal("third of a admitted past perPeer 2")
	}
	if !conns.Admit("b") || !conns.Admit("b") || conns.Admit("c") {
		t.Fatal("total of 4 not kept")
	}
	p1, p2 := net.Pipe()
	defer p2.Close()
	h := conns.Hold(p1, "a")
	h.Close()
	h.Close()
	if got := conns.Held(); got != 3 {
		t.Fatalf("held %d after one close (twice), want 3", got)
	}
	if !conns.Admit("c") {
		t.Fatal("freed place not given")
	}
}

// A sandbox's listener holds at most Max connections of its own: one past
// it is closed as it is accepted (not left in the socket's backlog, where
// a burst would queue ahead of every later connection), and a closed one
// gives its place back at once.
func TestBoundRefusesPastItsMax(t *testing.T) {
	conns := NewConns("test service", 100, 50, slog.New(slog.DiscardHandler))
	pl, dial, accepted, _ := acceptBound(t, func(ln net.Listener) *Bounded { return BoundWithin(ln, conns, "sandbox:s/c", 2, Refuse) })
	defer pl.Close()
	held := []net.Conn{<-withConn(t, dial, accepted), <-withConn(t, dial, accepted)}
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the third connection past Max 2: read %v, want it closed (EOF)", err)
	}
	held[0].Close()
	select {
	case c := <-withConn(t, dial, accepted):
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the place of a closed connection was not given back")
	}
	if got := conns.Held(); got != 1 {
		t.Errorf("held %d, want 1", got)
	}
}

// acceptBound makes a Bounded listener on a unix socket and accepts from it
// until it is closed: what it accepts comes on accepted, the error that
// ended it on ended; dial connects to it.
func acceptBound(t *testing.T, bound func(net.Listener) *Bounded) (bl *Bounded, dial func() net.Conn, accepted chan net.Conn, ended chan error) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/s.sock")
	if err != nil {
		t.Fatal(err)
	}
	bl = bound(ln)
	accepted, ended = make(chan net.Conn, 8), make(chan error, 1)
	go func() {
		for {
			c, err := bl.Accept()
			if err != nil {
				ended <- err
				return
			}
			accepted <- c
		}
	}()
	dial = func() net.Conn {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return bl, dial, accepted, ended
}

// withConn dials and returns the channel the accepted side arrives on.
func withConn(t *testing.T, dial func() net.Conn, accepted chan net.Conn) chan net.Conn {
	t.Helper()
	dial()
	return accepted
}

// In Wait mode a listener accepts no connection past its bound until one
// closes: the next waits (in the socket's backlog, not closed) and is
// accepted as soon as a place is free; Close ends an Accept that waits.
func TestBoundWaitsForAPlace(t *testing.T) {
	bl, dial, accepted, ended := acceptBound(t, func(ln net.Listener) *Bounded { return Bound(ln, 1, Wait) })
	dial()
	first := <-accepted
	second := dial()
	_ = second.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection past the bound: read %v, want it left waiting (deadline exceeded)", err)
	}
	select {
	case <-accepted:
		t.Fatal("a connection past the bound was accepted")
	default:
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not accepted once a place was free")
	}
	// Every place is free again: the next Accept waits in the socket, not
	// for a place. Hold the place, then Close must end an Accept waiting
	// for one.
	dial()
	held := <-accepted
	defer held.Close()
	bl.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end an Accept waiting for a place")
	}
}
