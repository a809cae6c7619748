package sandboxnet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// Bounds of one sandbox's budget socket. Every process of the sandbox
// reaches the socket, not only its runner, and a question the runner
// cannot ask holds its next story (budgets fail closed): so no connection
// may hold a place for long, and held ones never keep the runner out.
const (
	// budgetReadTimeout bounds the arrival of a whole question, head and
	// body (the runner's is a few hundred bytes, sent at once).
	budgetReadTimeout = 10 * time.Second
	// budgetHeadTimeout bounds the arrival of its head.
	budgetHeadTimeout = 5 * time.Second
	// budgetGrace is the time a new connection keeps its place whatever
	// comes after it: enough for a question sent at once to arrive, and
	// a bound on how fast connections that take each other's places can
	// turn over (a sandbox opening them in a loop).
	budgetGrace = time.Second
)

// serveBudget answers budget questions on sb's own budget socket.
func (n *Net) serveBudget(ln net.Listener, sb contract.Sandbox) error {
	// contract.ChannelConns places at once; past them a new connection
	// takes the place of the one that has waited longest without a whole
	// question (or idle), and is refused only when every place holds a
	// question being answered.
	l := newTakeoverListener(ln, contract.ChannelConns(contract.BudgetSocket), budgetGrace, n.log.With("container", sb.Container, "socket", contract.BudgetSocket))
	handler := n.ownHandler(sb, contract.BudgetPath, "budget questions", func() func(http.ResponseWriter, *http.Request, contract.Caller) {
		if b := n.budgets.get(); b != nil {
			return b.ServeBudget
		}
		return nil
	})
	srv := &http.Server{
		ReadHeaderTimeout: budgetHeadTimeout,
		ReadTimeout:       budgetReadTimeout,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ConnContext:       l.connContext,
		Handler:           l.wholeQuestion(handler, contract.BudgetMaxBody),
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
	return srv.Serve(l)
}

// takeoverListener serves at most max connections; a new one takes the
// place of the oldest that is not being answered (still arriving, or
// idle between questions) and is older than grace, so connections a
// sandbox holds open never keep a question out.
type takeoverListener struct {
	net.Listener
	max   int
	grace time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	conns map[*placeConn]struct{}
}

func newTakeoverListener(ln net.Listener, max int, grace time.Duration, log *slog.Logger) *takeoverListener {
	return &takeoverListener{Listener: ln, max: max, grace: grace, log: log, conns: map[*placeConn]struct{}{}}
}

// placeConn is a connection holding a place; answering is set while a
// whole question it sent is being answered.
type placeConn struct {
	net.Conn
	l         *takeoverListener
	since     time.Time // when it last began to wait (accepted, or answered)
	answering bool
	once      sync.Once
}

func (c *placeConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

func (l *takeoverListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pc := &placeConn{Conn: c, l: l, since: time.Now()}
		if victim, ok := l.admit(pc); ok {
			if victim != nil {
				l.log.Debug("budget socket: a connection that sent no whole question gave its place to a new one", "waited", time.Since(victim.since).Round(time.Millisecond))
				victim.Conn.Close() // its server goroutine sees the error and ends
			}
			return pc, nil
		}
		l.log.Debug("budget socket: connection refused: every place holds a question being answered or a new connection", "places", l.max)
		c.Close()
	}
}

// admit takes a place for pc, freeing the one that waited longest when
// all are held; ok is false when every place is answering or new.
func (l *takeoverListener) admit(pc *placeConn) (victim *placeConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		for c := range l.conns {
			if !c.answering && pc.since.Sub(c.since) >= l.grace && (victim == nil || c.since.Before(victim.since)) {
				victim = c
			}
		}
		if victim == nil {
			return nil, false
		}
		delete(l.conns, victim)
	}
	l.conns[pc] = struct{}{}
	return victim, true
}

type placeKey struct{}

// connContext makes the connection's place known to the handler.
func (l *takeoverListener) connContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*placeConn); ok {
		return context.WithValue(ctx, placeKey{}, pc)
	}
	return ctx
}

// wholeQuestion reads a request's body (at most maxBody) before next sees
// it, and keeps the connection's place while next answers.
func (l *takeoverListener) wholeQuestion(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "aimi: the question did not arrive whole: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		pc, _ := r.Context().Value(placeKey{}).(*placeConn)
		if pc != nil {
			l.setAnswering(pc, true)
			defer l.setAnswering(pc, false)
		}
		next.ServeHTTP(w, r)
	})
}

func (l *takeoverListener) setAnswering(pc *placeConn, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc.answering = on
	pc.since = time.Now()
}
