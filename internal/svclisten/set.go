package svclisten

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Options say what a service serves and how (a Set uses the fields up to
// MaxHeaderBytes; a Shell all of them).
type Options struct {
	// Name starts errors and log lines: "git service", "model gateway".
	Name string
	Log  *slog.Logger
	// Cert issues the server certificate for an address.
	Cert    func(net.IP) (tls.Certificate, error)
	Handler http.Handler
	Conns   *Conns
	// IdleTimeout and MaxHeaderBytes of every server.
	IdleTimeout    time.Duration
	MaxHeaderBytes int

	// Lock is the owner's mutex: it guards the Shell and the owner's
	// state persisted with the addresses.
	Lock sync.Locker
	// Persist is called with Lock held when the addresses changed; it
	// takes the owner's state with SavedLocked and returns what writes it
	// (or waits for the write), called once Lock is released.
	Persist func() (saved func() error)
	// Channel names the service among a sandbox's channels
	// (contract.ServiceGit...): its bound of connections per sandbox.
	Channel string
}

// listener serves one network's gateway address.
type listener struct {
	srv  *http.Server
	port int
	// subnet is the network the address belongs to, as the host's
	// interface holding it says.
	subnet *net.IPNet
	done   chan struct{}
}

// Set is the listeners of one service, one per address. Its owner's mutex
// guards every method.
type Set struct {
	opts      Options
	port      int // preferred: the first chosen, kept across restarts
	listeners map[string]*listener
	ips       map[string]bool // addresses listened on, kept through Close
}

// New makes an empty Set.
func New(opts Options) *Set {
	return &Set{opts: opts, listeners: map[string]*listener{}, ips: map[string]bool{}}
}

// SetPort sets the preferred port (the one persisted before a restart).
func (s *Set) SetPort(port int) { s.port = port }

// PreferredPort is the port to persist.
func (s *Set) PreferredPort() int { return s.port }

// IPs are the addresses to persist, sorted: those listened on, kept
// through Close.
func (s *Set) IPs() []string { return slices.Sorted(maps.Keys(s.ips)) }

// Port is the port served at ip, normalised first (0 when none).
func (s *Set) Port(ip string) int {
	if a := net.ParseIP(ip); a != nil {
		ip = a.String()
	}
	if l := s.listeners[ip]; l != nil {
		return l.port
	}
	return 0
}

// Listening is the addresses served, sorted.
func (s *Set) Listening() []string {
	return slices.Sorted(maps.Keys(s.listeners))
}

// Addrs is the addresses served with their ports (ip:port), sorted.
func (s *Set) Addrs() []string {
	var out []string
	for ip, l := range s.listeners {
		out = append(out, net.JoinHostPort(ip, strconv.Itoa(l.port)))
	}
	slices.Sort(out)
	return out
}

// Listen starts a TLS listener on ip, an address of the host, accepting
// connections from its subnet only, on the preferred port when it is free.
// It returns ip normalised, and whether the addresses to persist changed;
// listening there already on the same subnet, it does nothing. An address
// that moved to another subnet is served anew.
func (s *Set) Listen(ctx context.Context, ip string) (_ string, changed bool, err error) {
	addr := net.ParseIP(ip)
	if addr == nil {
		return ip, changed, fmt.Errorf("%s: listen on %q: not an IP address", s.opts.Name, ip)
	}
	ip = addr.String()
	subnet, err := HostSubnet(addr)
	if err != nil {
		return ip, changed, fmt.Errorf("%s: listen on %s: %w (is it the gateway of an existing network?)", s.opts.Name, ip, err)
	}
	if l, ok := s.listeners[ip]; ok && l.subnet.String() == subnet.String() {
		return ip, false, nil
	} else if ok {
		// The address now belongs to another network (the old one went,
		// a new one took its address): serve the new subnet.
		changed = s.Stop(ip, "the address moved to another network")
	}
	cert, err := s.opts.Cert(addr)
	if err != nil {
		return ip, changed, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(s.port)))
	if err != nil && s.port != 0 {
		s.opts.Log.Warn(s.opts.Name+" port taken, picking another (containers given the former port must be granted again)", "ip", ip, "port", s.port, "err", err)
		ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(ip, "0"))
	}
	if err != nil {
		return ip, changed, fmt.Errorf("%s: listen on %s: %w (is it the gateway of an existing network?)", s.opts.Name, ip, err)
	}
	l := s.serve(ln, ip, subnet, cert)
	s.listeners[ip] = l
	s.ips[ip] = true
	if s.port == 0 {
		// The first port chosen stays the preferred one; a fallback
		// port on one address does not move the others.
		s.port = l.port
	}
	s.opts.Log.Info(s.opts.Name+" listening", "addr", net.JoinHostPort(ip, strconv.Itoa(l.port)), "subnet", subnet.String())
	return ip, true, nil
}

// serve serves ln (on ip, of subnet) with TLS until it is shut down.
func (s *Set) serve(ln net.Listener, ip string, subnet *net.IPNet, cert tls.Certificate) *listener {
	port := ln.Addr().(*net.TCPAddr).Port
	l := &listener{port: port, subnet: subnet, done: make(chan struct{})}
	l.srv = s.opts.server()
	own := &subnetListener{Listener: ln, subnet: subnet, log: s.opts.Log, name: s.opts.Name, ip: ip, conns: s.opts.Conns}
	tlsLn := tls.NewListener(own, serverTLS(cert))
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(tlsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Log.Error(s.opts.Name+" listener stopped", "ip", ip, "port", port, "err", err)
		}
	}()
	return l
}

// Stop closes the listener on ip and forgets the address; the server's
// shutdown runs on its own (in-flight answers get a few seconds). It says
// whether there was one.
func (s *Set) Stop(ip, why string) bool {
	l := s.listeners[ip]
	if l == nil {
		return false
	}
	delete(s.listeners, ip)
	delete(s.ips, ip)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			l.srv.Close()
		}
	}()
	s.opts.Log.Info(s.opts.Name+" stopped listening", "ip", ip, "why", why)
	return true
}

// Sweep stops serving addresses the host no longer has (their network was
// removed) or that moved to another subnet, and returns them.
func (s *Set) Sweep() []string {
	var gone []string
	for ip, l := range s.listeners {
		subnet, err := HostSubnet(net.ParseIP(ip))
		switch {
		case err != nil:
			s.Stop(ip, "the host no longer has the address (its network is gone)")
		case subnet.String() != l.subnet.String():
			s.Stop(ip, "the address moved to another network")
		default:
			continue
		}
		gone = append(gone, ip)
	}
	return gone
}

// Detach takes every listener out of the set (the addresses stay to
// persist) and returns what shuts them down: call it without the owner's
// lock, it waits for in-flight answers until ctx ends.
func (s *Set) Detach() (shutdown func(ctx context.Context) error) {
	ls := s.listeners
	s.listeners = map[string]*listener{}
	return func(ctx context.Context) error {
		var errs []error
		for _, l := range ls {
			if err := l.srv.Shutdown(ctx); err != nil {
				errs = append(errs, l.srv.Close())
			}
			<-l.done
		}
		return errors.Join(errs...)
	}
}

// server is the HTTP server of every listener of the service.
func (o *Options) server() *http.Server {
	return &http.Server{
		Handler: o.Handler,
		// Also the TLS handshake's bound.
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		// Connection-level errors (TLS handshakes of scanners...) are
		// debug noise; they never carry request headers.
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
	}
}

// serverTLS is the TLS of every server: HTTP/1.1 only (the services
// stream answers and hijack nothing that HTTP/2 would serve better), said
// in ALPN so that a client offering h2 settles at once.
func serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// HostSubnet returns the subnet of the host interface address ip.
func HostSubnet(ip net.IP) (*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return &net.IPNet{IP: n.IP.Mask(n.Mask), Mask: n.Mask}, nil
		}
	}
	return nil, fmt.Errorf("%s is not an address of this host", ip)
}

// every runs f every interval until stop is closed.
func every(interval time.Duration, stop <-chan struct{}, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}
