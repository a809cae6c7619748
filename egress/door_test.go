package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/daemonca"
)

// whoService answers every connection with the sandbox it came for.
var whoService = Service{Name: "who", Port: func() int { return 4000 }, Serve: func(ln net.Listener, sb contract.Sandbox) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		_, _ = io.WriteString(c, sb.Swarm+"/"+sb.Container)
		_ = c.Close()
	}
}}

// ask connects to the door as a relay would and returns what came back.
func ask(t *testing.T, addr string, roots *x509.CertPool, service, key string) string {
	t.Helper()
	host, _, _ := net.SplitHostPort(addr)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: host})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s %s %s\n", contract.NetDoorHello, service, key)
	b, _ := io.ReadAll(c)
	return string(b)
}

// The door serves a connection as the sandbox whose key it presents, and
// only while that sandbox is open; a key made up or altered (another
// container's name under this one's MAC) gets nothing. The key and the
// port hold across a restart (a new Door on the same directory).
func TestDoorServesOnlyAnOpenSandboxsOwnKey(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := daemonca.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServerCert(net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	log := slog.New(slog.DiscardHandler)
	d, err := NewDoor(dir, "127.0.0.1", cert, log, whoService)
	if err != nil {
		t.Fatal(err)
	}
	a, b := contract.Sandbox{Swarm: "s1", Container: "aimi-a"}, contract.Sandbox{Swarm: "s1", Container: "aimi-b"}
	d.Open(a)
	d.Open(b)
	if got := ask(t, d.Addr(), roots, "who", d.Key(a)); got != "s1/aimi-a" {
		t.Errorf("a's key: %q, want s1/aimi-a", got)
	}
	forged := strings.Join(append(strings.Split(d.Key(b), ".")[:2], strings.Split(d.Key(a), ".")[2]), ".")
	if got := ask(t, d.Addr(), roots, "who", forged); got != "" {
		t.Errorf("b's names under a's MAC were served: %q", got)
	}
	if got := ask(t, d.Addr(), roots, "nope", d.Key(a)); got != "" {
		t.Errorf("an unknown service was served: %q", got)
	}
	d.Close(a)
	if got := ask(t, d.Addr(), roots, "who", d.Key(a)); got != "" {
		t.Errorf("a closed sandbox was served: %q", got)
	}
	addr, key := d.Addr(), d.Key(b)
	d.CloseAll()
	d2, err := NewDoor(dir, "127.0.0.1", cert, log, whoService)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.CloseAll()
	if d2.Addr() != addr {
		t.Errorf("after a restart the door is at %s, want %s", d2.Addr(), addr)
	}
	d2.Open(b)
	if got := ask(t, d2.Addr(), roots, "who", key); got != "s1/aimi-b" {
		t.Errorf("b's key after a restart: %q, want s1/aimi-b", got)
	}
}
