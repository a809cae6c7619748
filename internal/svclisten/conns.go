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
}

// NewConns bounds connections to max in total and perPeer from one source;
// name ("git service") starts its log lines.
func NewConns(name string, max, perPeer int, log *slog.Logger) *Conns {
	return &Conns{name: name, log: log, max: max, perPeer: perPeer, peers: map[string]int{}, refusedPeers: map[string]int{}}
}

// Admit takes a place for a connection from peer, or says there is none.
func (c *Conns) Admit(peer string) bool { return c.AdmitUpTo(peer, c.perPeer) }

// AdmitUpTo is Admit with peer's own bound instead of the bound per
// source address (a sandbox's channel: contract.ChannelConns).
func (c *Conns) AdmitUpTo(peer string, perPeer int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= c.max || c.peers[peer] >= perPeer {
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
	c.total++
	c.peers[peer]++
	return true
}

func (c *Conns) release(peer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.peers[peer]--; c.peers[peer] <= 0 {
		delete(c.peers, peer)
	}
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

// PeerListener admits every connection it accepts as from one peer (a
// socket only one container reaches), within conns' total and at most Max
// at once (a sandbox's channel: contract.ChannelConns; 0: conns' bound
// per source). One past them is closed as it is accepted, never left to
// wait in the socket's backlog: a burst held there would queue ahead of
// every later connection, the runner's own included, long after it ended.
type PeerListener struct {
	net.Listener
	Conns *Conns
	Peer  string
	Max   int
}

func (l *PeerListener) Accept() (net.Conn, error) {
	max := l.Max
	if max <= 0 {
		max = l.Conns.perPeer
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.Conns.AdmitUpTo(l.Peer, max) {
			c.Close()
			continue
		}
		return l.Conns.Hold(c, l.Peer), nil
	}
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
