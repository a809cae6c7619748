package board

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Limits bound what connections to the board can hold: another local user
// can open as many as they like, and each costs a file descriptor.
type Limits struct {
	// MaxConns bounds the open connections (default 256, and at most a
	// quarter of the process's RLIMIT_NOFILE).
	MaxConns int
	// MaxConnsPerSource bounds those from one source address (default 64):
	// a flood from one address displaces only its own connections.
	MaxConnsPerSource int
	// ReadHeaderTimeout bounds the wait for a request's headers (default 5s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no next
	// request (default 60s).
	IdleTimeout time.Duration
}

// Defaults of Limits.
const (
	defaultMaxConns          = 256
	defaultMaxConnsPerSource = 64
	defaultReadHeaderTimeout = 5 * time.Second
	defaultIdleTimeout       = 60 * time.Second
	maxHeaderBytes           = 16 << 10
	// fdShare: the board's connections take at most 1/fdShare of the file
	// descriptors the process may open.
	fdShare = 4
)

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = defaultMaxConns
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 && rl.Cur/fdShare < uint64(l.MaxConns) {
		l.MaxConns = max(int(rl.Cur/fdShare), 1)
	}
	if l.MaxConnsPerSource <= 0 {
		l.MaxConnsPerSource = defaultMaxConnsPerSource
	}
	l.MaxConnsPerSource = min(l.MaxConnsPerSource, l.MaxConns)
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = defaultIdleTimeout
	}
	return l
}

// limitListener keeps at most max connections open, perSource from one
// address. A connection over either bound takes the place of the one of
// the same scope (its address, or all) that has waited longest without a
// request in progress: a connection that sends nothing, is still sending
// its headers or sits idle between requests. A request in progress (the
// page's live stream) is never cut; when every connection has one, the new
// connection is closed. So a flood of parked connections churns among
// itself, and the owner's next request gets in.
type limitListener struct {
	net.Listener
	max, perSource int
	log            *slog.Logger

	mu       sync.Mutex
	conns    map[*trackedConn]struct{}
	bySource map[string]int
	lastWarn time.Time
}

func newLimitListener(ln net.Listener, l Limits, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: l.MaxConns, perSource: l.MaxConnsPerSource, log: log,
		conns: map[*trackedConn]struct{}{}, bySource: map[string]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		source := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(source); err == nil {
			source = h
		}
		tc := &trackedConn{Conn: c, l: l, source: source, since: time.Now()}
		if l.admit(tc) {
			return tc, nil
		}
		c.Close()
	}
}

// admit registers tc, evicting what it must; false: no room.
func (l *limitListener) admit(tc *trackedConn) bool {
	l.mu.Lock()
	var out []*trackedConn
	ok := true
	if l.bySource[tc.source] >= l.perSource {
		v := l.oldestIdle(tc.source)
		ok = v != nil
		out = append(out, v)
	}
	if ok && len(l.conns) >= l.max {
		v := l.oldestIdle("")
		ok = v != nil
		out = append(out, v)
	}
	if ok {
		l.conns[tc] = struct{}{}
		l.bySource[tc.source]++
	}
	warn := time.Since(l.lastWarn) > time.Minute
	if warn {
		l.lastWarn = time.Now()
	}
	l.mu.Unlock()
	for _, v := range out {
		if v != nil {
			v.Conn.Close()
		}
	}
	if (len(out) > 0 || !ok) && warn {
		l.log.Warn("board: connection limit reached; closing the longest idle connections (another local user may be flooding the port)",
			"max", l.max, "per_source", l.perSource, "source", tc.source)
	}
	return ok
}

// oldestIdle removes and returns the connection without a request in
// progress that has waited longest, from source ("" any). Called with mu.
func (l *limitListener) oldestIdle(source string) *trackedConn {
	var v *trackedConn
	for c := range l.conns {
		if c.busy == 0 && (source == "" || c.source == source) && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	if v != nil {
		l.drop(v)
	}
	return v
}

// drop unregisters c. Called with mu.
func (l *limitListener) drop(c *trackedConn) {
	if c.gone {
		return
	}
	c.gone = true
	delete(l.conns, c)
	if l.bySource[c.source]--; l.bySource[c.source] <= 0 {
		delete(l.bySource, c.source)
	}
}

// trackedConn is one admitted connection; its fields are guarded by the
// listener's mu.
type trackedConn struct {
	net.Conn
	l      *limitListener
	source string
	since  time.Time // accepted, or its last request ended
	busy   int       // requests in progress
	gone   bool      // closed or evicted
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// enter marks a request in progress; false when the connection was
// evicted meanwhile.
func (c *trackedConn) enter() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.gone {
		return false
	}
	c.busy++
	return true
}

func (c *trackedConn) leave() {
	c.l.mu.Lock()
	c.busy--
	c.since = time.Now()
	c.l.mu.Unlock()
}

type connKey struct{}

// tracked marks each request in progress on its connection.
func tracked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			if !c.enter() {
				return
			}
			defer c.leave()
		}
		h.ServeHTTP(w, r)
	})
}

// Serve serves the board on ln, within its Limits, until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	l := s.opts.Limits.withDefaults()
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.hs = &http.Server{
		Handler:           tracked(s),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	hs := s.hs
	s.mu.Unlock()
	return hs.Serve(newLimitListener(ln, l, s.log))
}

// Shutdown ends the open streams, then the server (as http.Server's).
func (s *Server) Shutdown(ctx context.Context) error {
	s.Close()
	s.mu.Lock()
	hs := s.hs
	s.shut = true
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}
