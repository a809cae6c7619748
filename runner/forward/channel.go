package forward

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/acceptloop"
)

// Limits bound what the connections of a forward's loopback port (the
// agent's processes) hold of its channel to the daemon. Zero fields take
// DefaultLimits of the forward's service.
type Limits struct {
	// Conns are held at once: the channel's bound at the daemon less the
	// runner's reserve (contract.ChannelReserve).
	Conns int
	// Waiting connections wait for a place at once, each up to Wait;
	// more are closed as they come. None waits in the port's backlog,
	// where a burst's connections would queue ahead of every later one.
	Waiting int
	Wait    time.Duration
	// FirstByte: a connection whose client says nothing this long is
	// closed (every service behind a forward hears its client first).
	FirstByte time.Duration
	// Idle: a connection with no byte either way this long is closed,
	// as is one whose writes stall this long. It outlasts every silent
	// wait of the daemon's services (the model gateway's wait for a
	// provider's limit), which end their connections themselves.
	Idle time.Duration
	// Linger: once the daemon's side ended, the client's side is closed
	// after this long without a byte.
	Linger time.Duration
}

// DefaultLimits are the limits of service's forward.
func DefaultLimits(service string) Limits {
	return Limits{
		Conns:   contract.ChannelConns(service) - contract.ChannelReserve(service),
		Waiting: 64, Wait: 10 * time.Second,
		FirstByte: 10 * time.Second, Idle: 20 * time.Minute, Linger: 5 * time.Second,
	}
}

// orDefaults fills l's zero fields from DefaultLimits(service).
func (l Limits) orDefaults(service string) Limits {
	d := DefaultLimits(service)
	for _, f := range []struct{ v, d *int }{{&l.Conns, &d.Conns}, {&l.Waiting, &d.Waiting}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *time.Duration }{{&l.Wait, &d.Wait}, {&l.FirstByte, &d.FirstByte}, {&l.Idle, &d.Idle}, {&l.Linger, &d.Linger}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return l
}

// gate hands out a forward's places.
type gate struct {
	slots   chan struct{}
	waiting atomic.Int32
	lim     Limits
}

func newGate(lim Limits) *gate {
	return &gate{slots: make(chan struct{}, lim.Conns), lim: lim}
}

// admit runs serve(c) in a place of its own, at once or after waiting for
// one; c is closed when none comes. It never blocks the accept loop.
func (g *gate) admit(c net.Conn, serve func(net.Conn), log *quietLog, service string) {
	release := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		go func() { defer release(); serve(c) }()
		return
	default:
	}
	if g.waiting.Add(1) > int32(g.lim.Waiting) {
		g.waiting.Add(-1)
		log.Warn("forward: connections refused, the service's channel is full", "service", service, "held", g.lim.Conns, "waiting", g.lim.Waiting)
		_ = c.Close()
		return
	}
	go func() {
		t := time.NewTimer(g.lim.Wait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
			g.waiting.Add(-1)
			defer release()
			serve(c)
		case <-t.C:
			g.waiting.Add(-1)
			log.Warn("forward: a connection waited too long for a place and was closed", "service", service, "waited", g.lim.Wait)
			_ = c.Close()
		}
	}()
}

// acceptLoop hands every connection of ln to handle until ln is closed.
// Any other failure (out of file descriptors) is waited out: a forward
// that stopped accepting would leave its port dead for the rest of the
// run, every later connection timing out in the port's backlog.
func acceptLoop(ln net.Listener, service string, log *quietLog, handle func(net.Conn)) {
	acceptloop.Run(ln, func(err error, wait time.Duration) {
		log.Warn("forward: accept failed; trying again", "service", service, "in", wait, "err", err)
	}, handle)
}

// Channels are a sandbox's started forwards.
type Channels struct {
	fws []Forward
}

// DialContext is the runner's own way to the daemon's services: an
// address of a forward (127.0.0.1:PORT) is dialled straight to its socket
// or relay, past the loopback listener and the agent's share of the
// channel (Limits.Conns), so the places the daemon keeps beyond that
// share are the runner's. Other addresses are dialled as they are. A nil
// Channels dials every address as it is.
func (ch *Channels) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if f, ok := ch.forwardAt(network, addr); ok {
		return dialForward(ctx, f)
	}
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, network, addr)
}

func (ch *Channels) forwardAt(network, addr string) (Forward, bool) {
	if ch == nil || (network != "tcp" && network != "tcp4") {
		return Forward{}, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return Forward{}, false
	}
	for _, f := range ch.fws {
		if strconv.Itoa(f.Port) == port {
			return f, true
		}
	}
	return Forward{}, false
}
