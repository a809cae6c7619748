package forward

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// relayConns bounds a relay's connections at once: the door bounds each
// service per sandbox too; this keeps a flood from piling up goroutines.
const relayConns = 256

// Relay is a Swarm mode sandbox's relay (acp-runner net-relay): the
// one other member of the sandbox's internal overlay. It listens on the
// forwards' ports at its address on that overlay only and sends each
// connection to the daemon's door over TLS, naming the service and
// presenting the sandbox's key (which the sandbox never holds).
type Relay struct {
	Forwards []Forward
	Door     string // HOST:PORT
	Subnet   *net.IPNet
	Key      string
	TLS      *tls.Config
	Log      *slog.Logger
}

// RelayFromEnv reads the relay's settings: contract.EnvNetForward,
// EnvNetDoor, EnvNetSubnet, the key and the CA files.
func RelayFromEnv(getenv func(string) string, keyFile, caFile string) (*Relay, error) {
	fws, err := Parse(getenv(contract.EnvNetForward), "")
	if err != nil || len(fws) == 0 {
		return nil, fmt.Errorf("%s: %w (want PORT=NAME pairs)", contract.EnvNetForward, errors.Join(err, errors.New("no forwards")))
	}
	door := getenv(contract.EnvNetDoor)
	host, _, err := net.SplitHostPort(door)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w (want HOST:PORT)", contract.EnvNetDoor, door, err)
	}
	_, subnet, err := net.ParseCIDR(getenv(contract.EnvNetSubnet))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want the overlay's CIDR)", contract.EnvNetSubnet, err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read the relay's key: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	return &Relay{
		Forwards: fws, Door: door, Subnet: subnet, Key: strings.TrimSpace(string(key)),
		TLS: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12},
	}, nil
}

// Run serves until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	ip, err := addressIn(ctx, r.Subnet)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, relayConns)
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for _, f := range r.Forwards {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("relay: listen for %s: %w", f.Name, err)
		}
		lns = append(lns, ln)
		go r.serve(ln, f, sem, &quietLog{log: log})
	}
	log.Info("relay serving", "addr", ip.String(), "door", r.Door, "forwards", len(r.Forwards))
	<-ctx.Done()
	return nil
}

func (r *Relay) serve(ln net.Listener, f Forward, sem chan struct{}, log *quietLog) {
	lim := f.Limits.orDefaults(f.Name)
	acceptLoop(ln, f.Name, log, func(c net.Conn) {
		select {
		case sem <- struct{}{}:
		default:
			_ = c.Close() // the sandbox has too many open: it waits, nobody else
			return
		}
		go func() {
			defer func() { <-sem }()
			defer func() { _ = c.Close() }()
			// Every service behind the door hears the client first (HTTP,
			// TLS): a connection closed before its first byte (the
			// runner's WaitRelay) never reaches the daemon, and one that
			// says nothing gives its place back.
			first := make([]byte, 16<<10)
			_ = c.SetReadDeadline(time.Now().Add(lim.FirstByte))
			n, _ := c.Read(first)
			if n == 0 {
				return
			}
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 15 * time.Second}, Config: r.TLS}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			up, err := d.DialContext(ctx, "tcp", r.Door)
			cancel()
			if err != nil {
				log.Warn("the daemon's door is unreachable", "door", r.Door, "err", err)
				return
			}
			defer func() { _ = up.Close() }()
			if _, err := fmt.Fprintf(up, "%s %s %s\n%s", contract.NetDoorHello, f.Name, r.Key, first[:n]); err != nil {
				return
			}
			copyBoth(c, up, lim, true)
		}()
	})
}

// addressIn waits (up to 30 s) for this container's address in subnet.
func addressIn(ctx context.Context, subnet *net.IPNet) (net.IP, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("relay: read the addresses: %w", err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
				return ipn.IP, nil
			}
		}
		if ctxutil.Sleep(ctx, 200*time.Millisecond) != nil {
			return nil, fmt.Errorf("relay: no address in %s (is the relay on the sandbox's network?)", subnet)
		}
	}
}
