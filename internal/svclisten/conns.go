package svclisten

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// refusedLogEvery is how often refused connections are summed up in the log
// (one line per refused connection would let a flood fill it).
const refusedLogEvery = 10 * time.Second

// Conns counts the connections held per source and in total (every
// listener of a service shares one): a flood from one sandbox holds its
// own share of the daemon's file descriptors, no more.
type Conns struct {
	name          string
	log           *slog.Logger
	max, perPeer  int
	mu            sync.Mutex
	total         int
	peers         map[string]int
	refused       int
	refusedPeers  map[string]int
	lastRefuseLog time.Time
	// freed is closed, and made anew, when a place is given back: what a
	// listener in Wait mode waits on.
	freed chan struct{}
}

// NewConns bounds connections to max in total and perPeer from one source;
// name ("git service") starts its log lines (nil log: none).
func NewConns(name string, max, perPeer int, log *slog.Logger) *Conns {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conns{name: name, log: log, max: max, perPeer: perPeer, peers: map[string]int{}, refusedPeers: map[string]int{},
		freed: make(chan struct{})}
}

// Admit takes a place for a connection from peer, or says there is none.
func (c *Conns) Admit(peer string) bool { return c.AdmitUpTo(peer, c.perPeer) }

// AdmitUpTo is Admit with peer's own bound instead of the bound per
// source address (a sandbox's channel: contract.ChannelConns). A refusal
// is logged, summed up over refusedLogEvery.
func (c *Conns) AdmitUpTo(peer string, perPeer int) bool {
	if _, ok := c.take(peer, perPeer); ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused++
	if len(c.refusedPeers) < 16 {
		c.refusedPeers[peer]++
	}
	if time.Since(c.lastRefuseLog) >= refusedLogEvery {
		c.log.Warn(c.name+": connections refused: over the limit per source address or sandbox, or in total",
			"refused", c.refused, "from", c.refusedPeers, "perSource", perPeer, "total", c.max, "held", c.total)
		c.refused, c.refusedPeers, c.lastRefuseLog = 0, map[string]int{}, time.Now()
	}
	return false
}

// take takes a place for peer (bound perPeer) if there is one, and says
// otherwise what closes when one is given back. Nothing is logged: the
// caller waits for a place rather than refusing.
func (c *Conns) take(peer string, perPeer int) (freed <-chan struct{}, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= c.max || c.peers[peer] >= perPeer {
		return c.freed, false
	}
	c.total++
	c.peers[peer]++
	return nil, true
}

func (c *Conns) release(peer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.peers[peer]--; c.peers[peer] <= 0 {
		delete(c.peers, peer)
	}
	close(c.freed)
	c.freed = make(chan struct{})
}

// Held is how many connections hold a place now.
func (c *Conns) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Hold wraps conn, admitted for peer, so that its first Close gives the
// place back.
func (c *Conns) Hold(conn net.Conn, peer string) net.Conn {
	return &heldConn{Conn: conn, release: func() { c.release(peer) }}
}

// heldConn gives its place back once, at its first Close.
type heldConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes when the connection can (a tunnel's end: the
// egress proxy's CONNECT).
func (c *heldConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Mode is what a bounded listener does with a connection past its bound.
type Mode int

const (
	// Refuse closes it as it is accepted, never leaving it to wait in the
	// socket's backlog: a burst held there would queue ahead of every later
	// connection, a runner's own included, long after it ended.
	Refuse Mode = iota
	// Wait accepts no more until a connection closes: the next ones wait
	// in the socket's backlog. For a socket of one sandbox's own, whose
	// client waits rather than failing (the egress proxy, permission
	// requests, budgets): it slows that sandbox and nobody else.
	Wait
)

// Bounded is a listener holding at most Max connections at once, within
// the total of its Conns (shared with other listeners) and counted as
// Peer's there; Mode says what becomes of one past them.
type Bounded struct {
	net.Listener
	conns *Conns
	peer  string
	max   int
	mode  Mode
	done  chan struct{}
	once  sync.Once
}

// Bound bounds ln, a socket only one sandbox reaches, to max connections
// at once.
func Bound(ln net.Listener, max int, mode Mode) *Bounded {
	return BoundWithin(ln, NewConns("", max, max, nil), "", max, mode)
}

// BoundWithin bounds ln to max connections at once (0: conns' bound per
// source), within conns' total, counted there as peer's (a socket only
// one sandbox reaches: "sandbox:SWARM/CONTAINER").
func BoundWithin(ln net.Listener, conns *Conns, peer string, max int, mode Mode) *Bounded {
	if max <= 0 {
		max = conns.perPeer
	}
	return &Bounded{Listener: ln, conns: conns, peer: peer, max: max, mode: mode, done: make(chan struct{})}
}

func (l *Bounded) Accept() (net.Conn, error) {
	if l.mode == Wait {
		return l.acceptWaiting()
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.conns.AdmitUpTo(l.peer, l.max) {
			c.Close()
			continue
		}
		return l.conns.Hold(c, l.peer), nil
	}
}

// acceptWaiting takes a place first, then accepts into it.
func (l *Bounded) acceptWaiting() (net.Conn, error) {
	for {
		freed, ok := l.conns.take(l.peer, l.max)
		if ok {
			break
		}
		select {
		case <-freed:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.conns.release(l.peer)
		return nil, err
	}
	return l.conns.Hold(c, l.peer), nil
}

// Close closes the socket and ends an Accept waiting for a place.
func (l *Bounded) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// subnetListener closes connections from outside subnet, and those past
// the limits of conns, as they are accepted (before TLS).
type subnetListener struct {
	net.Listener
	subnet *net.IPNet
	log    *slog.Logger
	name   string
	ip     string
	conns  *Conns
}

func (l *subnetListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !l.subnet.Contains(a.IP) {
			l.log.Debug(l.name+": connection from outside the gateway's network refused", "gateway", l.ip, "from", c.RemoteAddr().String())
			c.Close()
			continue
		}
		peer := a.IP.String()
		if !l.conns.Admit(peer) {
			c.Close()
			continue
		}
		return l.conns.Hold(c, peer), nil
	}
}
