package forward

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// FromEnv starts the forwards getenv's AIMI_NET_FORWARD names (sockets in
// contract.NetDir, or on a cluster the relay AIMI_NET_RELAY names), until
// ctx ends; none when it is empty. Through a relay it returns once the
// relay accepts (or after relayReady): see WaitRelay. The Channels are
// the runner's own way to the services (nil without forwards: every
// address is dialled as it is).
func FromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*Channels, error) {
	fws, err := Parse(getenv(contract.EnvNetForward), contract.NetDir)
	fws = ViaRelay(fws, getenv(contract.EnvNetRelay))
	var ch *Channels
	if err == nil {
		ch, err = Start(ctx, fws, log)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", contract.EnvNetForward, err)
	}
	WaitRelay(ctx, fws, relayReady, log)
	return ch, nil
}

// relayReady bounds WaitRelay in FromEnv: on a loaded cluster the relay's
// task may start half a minute after the sandbox's.
const relayReady = 3 * time.Minute

// WaitRelay waits (up to bound) until the relay of fws accepts a
// connection. The sandbox's relay is a service of its own that a cluster
// may start after the sandbox: until it listens, a forward holds each
// connection while it dials the relay again, and a client that bounds
// its handshake (Go's HTTP client: 10 s for TLS) or a git clone gives up
// on a connection that would have gone through. Waiting here, before the
// clone and the agent, makes their first connection find the relay up.
// Forwards without a relay return at once; a relay that never comes is
// logged and left to each connection's own retries and errors.
func WaitRelay(ctx context.Context, fws []Forward, bound time.Duration, log *slog.Logger) {
	if len(fws) == 0 || fws[0].Addr == "" {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var d net.Dialer
	for attempt, wait := 1, 100*time.Millisecond; ; attempt, wait = attempt+1, min(2*wait, 2*time.Second) {
		dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
		c, err := d.DialContext(dctx, "tcp", fws[0].Addr)
		dcancel()
		if err == nil {
			_ = c.Close()
			if attempt > 1 {
				log.Info("the relay accepts", "relay", fws[0].Addr, "attempts", attempt, "took", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		select {
		case <-ctx.Done():
			log.Warn("the relay does not accept yet; going on, each connection retries it", "relay", fws[0].Addr, "waited", time.Since(start).Round(time.Second), "err", err)
			return
		case <-time.After(wait):
		}
	}
}

// maxForwards bounds AIMI_NET_FORWARD's entries.
const maxForwards = 16

// Forward is one loopback port served by dialling a unix socket, or
// the relay at Addr (Docker Swarm mode: ViaRelay).
type Forward struct {
	Port   int
	Name   string // the service (NAME of PORT=NAME)
	Socket string
	Addr   string // HOST:PORT dialled over TCP instead of Socket
	// Limits of the connections to Port; zero fields take DefaultLimits
	// of Name.
	Limits Limits
}

// ViaRelay has each forward dial host at its own port instead of its
// socket: a Swarm mode sandbox's relay (contract.EnvNetRelay). An empty
// host changes nothing.
func ViaRelay(fws []Forward, host string) []Forward {
	if host == "" {
		return fws
	}
	out := make([]Forward, len(fws))
	for i, f := range fws {
		f.Addr = net.JoinHostPort(host, strconv.Itoa(f.Port))
		out[i] = f
	}
	return out
}

// Parse reads AIMI_NET_FORWARD: PORT=NAME pairs, comma-separated,
// NAME a lower-case word naming NAME.sock in dir.
func Parse(spec, dir string) ([]Forward, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	parts := strings.Split(spec, ",")
	if len(parts) > maxForwards {
		return nil, fmt.Errorf("more than %d forwards", maxForwards)
	}
	var out []Forward
	seen := map[int]bool{}
	for _, p := range parts {
		port, name, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(port)
		if !ok || err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port || seen[n] {
			return nil, fmt.Errorf("forward %q: want PORT=NAME with a port from 1 to 65535, each port once", p)
		}
		if name == "" || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz") != "" {
			return nil, fmt.Errorf("forward %q: NAME must be a lower-case word", p)
		}
		seen[n] = true
		out = append(out, Forward{Port: n, Name: name, Socket: filepath.Join(dir, name+".sock")})
	}
	return out, nil
}

// Start listens on 127.0.0.1:PORT of each forward and copies every
// connection to its socket within the forward's Limits, until ctx ends. A
// container without a network reaches the daemon's services only so. The
// Channels it returns are the runner's own way to the same services.
func Start(ctx context.Context, fws []Forward, log *slog.Logger) (*Channels, error) {
	fws = slices.Clone(fws)
	var lns []net.Listener
	for i, f := range fws {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("forward 127.0.0.1:%d to %s: %w", f.Port, f.Socket, err)
		}
		lns = append(lns, ln)
		fws[i].Limits = f.Limits.orDefaults(f.Name)
		go serveForward(ln, fws[i], &quietLog{log: log})
	}
	go func() {
		<-ctx.Done()
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	return &Channels{fws: fws}, nil
}

// quietLog logs a failure at most once a minute: a sandbox opening
// thousands of connections must not flood the journal with warnings.
type quietLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	last time.Time
}

func (q *quietLog) Warn(msg string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.last) < time.Minute {
		return
	}
	q.last = time.Now()
	q.log.Warn(msg, args...)
}

func serveForward(ln net.Listener, f Forward, log *quietLog) {
	g := newGate(f.Limits)
	acceptLoop(ln, f.Name, log, func(c net.Conn) {
		g.admit(c, func(c net.Conn) {
			defer func() { _ = c.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), relayWait)
			up, err := dialForward(ctx, f)
			cancel()
			if err != nil {
				log.Warn("the daemon's service is unreachable", "service", f.Name, "err", err)
				return
			}
			defer func() { _ = up.Close() }()
			copyBoth(c, up, f.Limits, false)
		}, log, f.Name)
	})
}

// relayWait is how long a forward through a relay retries: the relay's
// task may start after the sandbox's, or come back on another node.
const relayWait = time.Minute

// dialForward dials f's socket, or its relay (retrying until ctx ends).
func dialForward(ctx context.Context, f Forward) (net.Conn, error) {
	var d net.Dialer
	if f.Addr == "" {
		return d.DialContext(ctx, "unix", f.Socket)
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		c, err := d.DialContext(dctx, "tcp", f.Addr)
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}
