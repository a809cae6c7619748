package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// FromEnv starts the forwards getenv's AIMI_NET_FORWARD names (sockets in
// contract.NetDir), until ctx ends; none when it is empty.
func FromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) error {
	fws, err := Parse(getenv(contract.EnvNetForward), contract.NetDir)
	if err == nil {
		err = Start(ctx, fws, log)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", contract.EnvNetForward, err)
	}
	return nil
}

// maxForwards bounds AIMI_NET_FORWARD's entries.
const maxForwards = 16

// Forward is one loopback port served by dialling a unix socket.
type Forward struct {
	Port   int
	Socket string
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
		out = append(out, Forward{Port: n, Socket: filepath.Join(dir, name+".sock")})
	}
	return out, nil
}

// Start listens on 127.0.0.1:PORT of each forward and copies every
// connection to its socket, until ctx ends. A container without a network
// reaches the daemon's services only so.
func Start(ctx context.Context, fws []Forward, log *slog.Logger) error {
	var lns []net.Listener
	for _, f := range fws {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("forward 127.0.0.1:%d to %s: %w", f.Port, f.Socket, err)
		}
		lns = append(lns, ln)
		go serveForward(ln, f.Socket, &quietLog{log: log})
	}
	go func() {
		<-ctx.Done()
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	return nil
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

func serveForward(ln net.Listener, socket string, log *quietLog) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Warn("forward stopped", "socket", socket, "err", err)
			}
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			up, err := net.Dial("unix", socket)
			if err != nil {
				log.Warn("the daemon's service is unreachable", "socket", socket, "err", err)
				return
			}
			defer func() { _ = up.Close() }()
			copyBoth(c, up)
		}()
	}
}

// copyBoth copies both ways until both directions ended.
func copyBoth(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}
