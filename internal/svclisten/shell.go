package svclisten

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// DefaultSweepInterval is how often a service looks for listening
// addresses the host no longer has (a sandbox network was removed: by
// cleanup, by `docker network prune`, by an engine restart).
const DefaultSweepInterval = 30 * time.Second

// Addresses are what a service persists of its listeners, with its own
// state (its JSON fields are inlined in the service's file).
type Addresses struct {
	// Port is reused at every listen and after a restart, so the URLs
	// handed to running containers stay valid across daemon restarts.
	Port int `json:"port"`
	// IPs are the addresses listened on; after a restart the service
	// listens again on those still on the host, so containers running
	// across it keep reaching it before the orchestrator calls ListenOn.
	IPs []string `json:"ips,omitempty"`
}

// Shell is a sandbox-facing service's serving: its listener set on the
// networks' gateway addresses, persisted with the owner's state and swept
// of gone addresses, and a server on each sandbox's own socket. Methods
// take the owner's lock (Options.Lock) unless named Locked.
type Shell struct {
	opts      Options
	set       *Set
	last      string // the address most recently listened on, while served
	former    []string
	closed    bool
	stopSweep chan struct{} // closed by Close
	// swept is closed when the sweeping goroutine has ended, its last
	// write included: Close waits for it (nil before Start).
	swept     chan struct{}
	sandboxes map[*http.Server]bool
}

// NewShell makes a Shell that listens nowhere yet.
func NewShell(opts Options) *Shell {
	return &Shell{opts: opts, set: New(opts), stopSweep: make(chan struct{}), sandboxes: map[*http.Server]bool{}}
}

// Restore takes the addresses persisted before a restart: the preferred
// port, and the addresses Start listens on again.
func (h *Shell) Restore(a Addresses) {
	h.set.SetPort(a.Port)
	h.former = a.IPs
}

// Start listens again on the addresses of before a restart that the host
// still has, so containers running across it keep reaching the service,
// and sweeps gone addresses every interval (0: DefaultSweepInterval)
// until Close.
func (h *Shell) Start(interval time.Duration) {
	for _, ip := range h.former {
		// A network removed while the daemon was down took its gateway
		// address with it: nothing to serve there.
		if err := h.ListenOn(context.Background(), ip); err != nil {
			h.opts.Log.Info(h.opts.Name+": not listening on a former address", "ip", ip, "err", err)
		}
	}
	h.former = nil
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	swept := make(chan struct{})
	h.opts.Lock.Lock()
	h.swept = swept
	h.opts.Lock.Unlock()
	go func() {
		defer close(swept)
		every(interval, h.stopSweep, h.sweep)
	}()
}

// SavedLocked are the addresses to persist (from Persist).
func (h *Shell) SavedLocked() Addresses {
	return Addresses{Port: h.set.PreferredPort(), IPs: h.set.IPs()}
}

// ListenOn starts a TLS listener on ip (a sandbox network's gateway, or
// git.address on a cluster) with a certificate for that IP signed by the
// daemon's CA. The port is the one used before (also before a daemon
// restart) when it is free, else one the system picks. Calling it again
// for the same ip does nothing. Only connections from ip's own subnet are
// accepted: a sandbox of another network reaches every address of the
// host and must be refused on all but its own.
func (h *Shell) ListenOn(ctx context.Context, ip string) error {
	h.opts.Lock.Lock()
	if h.closed {
		h.opts.Lock.Unlock()
		return errors.New(h.opts.Name + ": ListenOn after Close")
	}
	ip, changed, err := h.set.Listen(ctx, ip)
	if err == nil {
		h.last = ip
	} else if h.last == ip && h.set.Port(ip) == 0 {
		h.last = ""
	}
	var saved func() error
	if changed {
		saved = h.opts.Persist()
	}
	h.opts.Lock.Unlock()
	h.wait(saved)
	return err
}

// wait waits for a write Persist staged, and logs its failure.
func (h *Shell) wait(saved func() error) {
	if saved == nil {
		return
	}
	if err := saved(); err != nil {
		h.opts.Log.Warn("could not persist the "+h.opts.Name+"'s addresses", "err", err)
	}
}

// sweep stops serving addresses the host no longer has (their network
// was removed) or that moved to another subnet.
func (h *Shell) sweep() {
	h.opts.Lock.Lock()
	gone := h.set.Sweep()
	if slices.Contains(gone, h.last) {
		h.last = ""
	}
	var saved func() error
	if len(gone) > 0 {
		saved = h.opts.Persist()
	}
	h.opts.Lock.Unlock()
	h.wait(saved)
}

// Listening is the addresses served, sorted.
func (h *Shell) Listening() []string {
	h.opts.Lock.Lock()
	defer h.opts.Lock.Unlock()
	return h.set.Listening()
}

// Addrs is the addresses served with their ports (ip:port), sorted.
func (h *Shell) Addrs() []string {
	h.opts.Lock.Lock()
	defer h.opts.Lock.Unlock()
	return h.set.Addrs()
}

// Port is the port served at ip (0 when none).
func (h *Shell) Port(ip string) int {
	h.opts.Lock.Lock()
	defer h.opts.Lock.Unlock()
	return h.set.Port(ip)
}

// PortLocked is Port with the owner's lock held.
func (h *Shell) PortLocked(ip string) int { return h.set.Port(ip) }

// LastLocked is the address most recently listened on while it is served
// ("" when none).
func (h *Shell) LastLocked() string { return h.last }

// Close stops every listener and every sandbox's server; in-flight answers
// get a few seconds.
func (h *Shell) Close() error {
	h.opts.Lock.Lock()
	if !h.closed {
		close(h.stopSweep)
	}
	h.closed = true
	shutdown := h.set.Detach()
	srvs := slices.Collect(maps.Keys(h.sandboxes))
	swept := h.swept
	h.opts.Lock.Unlock()
	if swept != nil {
		// A sweep under way stages its write under the lock and makes it
		// after: the owner's state must hold it once Close returns.
		<-swept
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	return shutdown(ctx)
}

type sandboxKey struct{}

// SandboxOf says which sandbox a request of ctx came from, when it came
// through that sandbox's own socket (ServeSandbox).
func SandboxOf(ctx context.Context) (contract.Sandbox, bool) {
	sb, ok := ctx.Value(sandboxKey{}).(contract.Sandbox)
	return sb, ok
}

// ServeSandbox answers one container's connections on ln, a socket only
// that container reaches (a unix socket in its own directory, or its
// relay's stream behind the door), until ln is closed. The socket says
// who is asking (SandboxOf). At most the channel's bound of connections
// are held at once (contract.ChannelConns): one past it is refused as it
// comes. The certificate names 127.0.0.1, where the container's runner
// serves the socket.
func (h *Shell) ServeSandbox(ln net.Listener, sb contract.Sandbox) error {
	// Issued per socket, not kept: a certificate is valid for months, a
	// daemon may run longer.
	cert, err := h.opts.Cert(net.IPv4(127, 0, 0, 1))
	if err != nil {
		ln.Close()
		return err
	}
	srv := h.opts.server()
	srv.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, sandboxKey{}, sb)
	}
	peer := "sandbox:" + sb.Swarm + "/" + sb.Container
	lim := BoundWithin(ln, h.opts.Conns, peer, contract.ChannelConns(h.opts.Channel), Refuse)
	h.opts.Lock.Lock()
	if h.closed {
		h.opts.Lock.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	h.sandboxes[srv] = true
	h.opts.Lock.Unlock()
	defer func() {
		h.opts.Lock.Lock()
		delete(h.sandboxes, srv)
		h.opts.Lock.Unlock()
	}()
	return srv.Serve(tls.NewListener(lim, serverTLS(cert)))
}
