package egress

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/acceptloop"
	"github.com/aimi-tools/swarm/internal/atomicfile"
)

const (
	// doorHandshakes bounds the connections at the door that have not
	// yet named their sandbox (TLS handshake and hello line).
	doorHandshakes = 256
	// doorBacklog is how many of one sandbox's connections to one service
	// wait for its server (which serves forwardsPerSandbox at once);
	// more are closed: a flooding sandbox loses its own connections.
	doorBacklog = 64
	// maxHello bounds the hello line.
	maxHello = 512
)

// Door serves the sandboxes of a Docker Swarm mode cluster, whose nodes
// share no filesystem with the daemon: each sandbox's relay connects over
// TLS, names the service and presents the sandbox's key (Key), and the
// connection is served as the unix socket of that sandbox and service
// would be on one engine (Sockets). A key is an HMAC of the sandbox's
// names under a key of the daemon's (kept in its data directory), so it
// holds across daemon restarts; a sandbox that is not open is refused.
type Door struct {
	secret   []byte
	services []Service
	log      *slog.Logger
	ln       net.Listener
	sem      chan struct{}

	mu   sync.Mutex
	open map[contract.Sandbox]map[string]*chanListener
}

// NewDoor listens on host at the port it had before (dir/door.port) when
// it is free, with cert, and serves services to the sandboxes Open names.
func NewDoor(dir, host string, cert tls.Certificate, log *slog.Logger, services ...Service) (*Door, error) {
	if log == nil {
		log = slog.Default()
	}
	for _, s := range services {
		if s.Name == "" || strings.Trim(s.Name, "abcdefghijklmnopqrstuvwxyz") != "" || s.Port == nil || s.Serve == nil {
			return nil, fmt.Errorf("sandbox door: bad service %q", s.Name)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox door: make %s: %w", dir, err)
	}
	secret, err := doorSecret(filepath.Join(dir, "door.key"))
	if err != nil {
		return nil, err
	}
	portFile := filepath.Join(dir, "door.port")
	port := "0"
	if b, err := os.ReadFile(portFile); err == nil {
		port = strings.TrimSpace(string(b))
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil && port != "0" {
		log.Warn("the door's port is taken, picking another (relays of running sandboxes lose the daemon)", "port", port, "err", err)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox door: listen on %s: %w (git.address must be an address of this machine that every node reaches)", host, err)
	}
	p := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if err := atomicfile.WriteFile(portFile, []byte(p+"\n"), 0o600); err != nil {
		log.Warn("could not keep the door's port for the next start", "err", err)
	}
	d := &Door{secret: secret, services: services, log: log, sem: make(chan struct{}, doorHandshakes), open: map[contract.Sandbox]map[string]*chanListener{}}
	d.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go d.accept()
	log.Info("sandbox door listening", "addr", ln.Addr().String())
	return d, nil
}

// doorSecret reads the door's HMAC key, made on the first start.
func doorSecret(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("sandbox door: make a key: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("sandbox door: keep its key: %w", err)
	}
	return b, nil
}

// Addr is where the door listens (HOST:PORT).
func (d *Door) Addr() string { return d.ln.Addr().String() }

// Forward is what AIMI_NET_FORWARD holds for the sandbox and its relay.
func (d *Door) Forward() string { return forwardOf(d.services) }

// Key is sb's credential at the door: its relay holds it, never the
// sandbox.
func (d *Door) Key(sb contract.Sandbox) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(sb.Swarm)) + "." + enc.EncodeToString([]byte(sb.Container)) + "." + hex.EncodeToString(d.mac(sb))
}

func (d *Door) mac(sb contract.Sandbox) []byte {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte(sb.Swarm + "\x00" + sb.Container))
	return m.Sum(nil)
}

// sandboxOf checks a key and names its sandbox.
func (d *Door) sandboxOf(key string) (contract.Sandbox, bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 {
		return contract.Sandbox{}, false
	}
	enc := base64.RawURLEncoding
	swarm, err1 := enc.DecodeString(parts[0])
	ctr, err2 := enc.DecodeString(parts[1])
	sum, err3 := hex.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return contract.Sandbox{}, false
	}
	sb := contract.Sandbox{Swarm: string(swarm), Container: string(ctr)}
	return sb, hmac.Equal(sum, d.mac(sb))
}

// Open serves sb's connections; calling it again does nothing.
func (d *Door) Open(sb contract.Sandbox) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.open[sb]; ok {
		return
	}
	lns := map[string]*chanListener{}
	for _, sv := range d.services {
		ln := newChanListener(d.ln.Addr())
		lns[sv.Name] = ln
		go func(sv Service) {
			if err := sv.Serve(ln, sb); err != nil && !errors.Is(err, net.ErrClosed) {
				d.log.Warn("sandbox service stopped", "service", sv.Name, "container", sb.Container, "err", err)
			}
		}(sv)
	}
	d.open[sb] = lns
}

// Close stops serving sb: its relay's connections are refused.
func (d *Door) Close(sb contract.Sandbox) {
	d.mu.Lock()
	lns := d.open[sb]
	delete(d.open, sb)
	d.mu.Unlock()
	for _, l := range lns {
		_ = l.Close()
	}
}

// CloseAll stops the door (the daemon stops).
func (d *Door) CloseAll() {
	_ = d.ln.Close()
	d.mu.Lock()
	all := d.open
	d.open = map[contract.Sandbox]map[string]*chanListener{}
	d.mu.Unlock()
	for _, lns := range all {
		for _, l := range lns {
			_ = l.Close()
		}
	}
}

func (d *Door) accept() {
	failed := func(err error, wait time.Duration) {
		d.log.Warn("sandbox door: accept failed; trying again", "in", wait, "err", err)
	}
	acceptloop.Run(d.ln, failed, func(c net.Conn) {
		select {
		case d.sem <- struct{}{}:
		default:
			_ = c.Close()
			return
		}
		go func() {
			defer func() { <-d.sem }()
			d.admit(c)
		}()
	})
}

// admit reads the hello line (within 15 s) and hands the connection to
// its sandbox's service, or closes it.
func (d *Door) admit(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	line, err := readLine(c, maxHello)
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != contract.NetDoorHello {
		_ = c.Close()
		return
	}
	sb, ok := d.sandboxOf(f[2])
	d.mu.Lock()
	ln := d.open[sb][f[1]]
	d.mu.Unlock()
	if !ok || ln == nil {
		d.log.Debug("sandbox door: refused a connection", "from", c.RemoteAddr().String(), "service", sanitize(f[1]), "known", ok)
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if !ln.deliver(c) {
		_ = c.Close()
	}
}

// readLine reads up to '\n' one byte at a time (nothing past it is
// consumed), at most max bytes.
func readLine(c net.Conn, max int) (string, error) {
	var b [1]byte
	var sb strings.Builder
	for sb.Len() < max {
		if _, err := c.Read(b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return sb.String(), nil
		}
		sb.WriteByte(b[0])
	}
	return "", errors.New("hello line too long")
}

// sanitize bounds untrusted text for a log.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}

// chanListener is one sandbox's service at the door: Accept hands out
// the connections admit delivers.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn, doorBacklog), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	select {
	case l.ch <- c:
		return true
	default:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		for {
			select {
			case c := <-l.ch:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
