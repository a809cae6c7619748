package forward

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/daemonca"
)

// A connection to the runner's loopback forward goes to the relay (at the
// forward's port of the relay's host), and the relay opens it at the door
// over TLS with the hello line naming the service and the key, then copies
// the bytes both ways.
func TestForwardThroughTheRelayReachesTheDoorWithTheKey(t *testing.T) {
	ca, _, err := daemonca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServerCert(net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	door, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer door.Close()
	hellos := make(chan string, 1)
	go func() {
		c, err := door.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		line, _ := r.ReadString('\n')
		hellos <- strings.TrimSpace(line)
		msg, _ := r.ReadString('\n')
		_, _ = io.WriteString(c, "echo "+msg)
	}()

	// Free ports for the relay and the runner's forward.
	relayPort, fwdPort := freePort(t), freePort(t)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	_, lo, _ := net.ParseCIDR("127.0.0.0/8")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Relay{
		Forwards: []Forward{{Port: relayPort, Name: "git"}}, Door: door.Addr().String(), Subnet: lo, Key: "k.e.y",
		TLS: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}, Log: slog.New(slog.DiscardHandler),
	}
	go func() { _ = r.Run(ctx) }()
	fws := ViaRelay([]Forward{{Port: relayPort, Name: "git"}}, "127.0.0.1")
	fws[0].Port = fwdPort // the runner listens on its own loopback port
	if _, err := Start(ctx, fws, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fwdPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(c, "hello\n")
	got, _ := bufio.NewReader(c).ReadString('\n')
	if got != "echo hello\n" {
		t.Errorf("through the relay: %q, want the door's echo", got)
	}
	select {
	case h := <-hellos:
		if h != contract.NetDoorHello+" git k.e.y" {
			t.Errorf("hello line %q", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the door got no connection")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
