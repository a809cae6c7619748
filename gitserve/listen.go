package gitserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// DefaultSweepInterval is how often the service looks for listening
// addresses the host no longer has (the swarm network was removed: by
// cleanup, by `docker network prune`, by an engine restart).
const DefaultSweepInterval = 30 * time.Second

// listener serves one swarm network's gateway.
type listener struct {
	srv  *http.Server
	port int
	// subnet is the network the gateway belongs to, as the host's
	// interface holding the address says: connections from anywhere else
	// (another swarm's network reaching this gateway through the host) are
	// closed before TLS.
	subnet *net.IPNet
	done   chan struct{}
}

// ListenOn starts a TLS listener on ip (the swarm network's gateway) with a
// certificate for that IP. The port is the one used before (also before a
// daemon restart) when it is free, else one the system picks. Calling it
// again for the same ip does nothing; the most recent ip is the one Grant
// uses when the caller names no gateway. The listener accepts connections
// from the gateway's own subnet only: a sandbox on another swarm's network
// reaches every gateway of the host, and must be refused on all but its
// own.
func (s *Service) ListenOn(ctx context.Context, ip string) error {
	addr := net.ParseIP(ip)
	if addr == nil {
		return fmt.Errorf("git service: listen on %q: not an IP address", ip)
	}
	ip = addr.String()
	subnet, err := hostSubnet(addr)
	if err != nil {
		return fmt.Errorf("git service: listen on %s: %w (is it the gateway of an existing network?)", ip, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("git service: ListenOn after Close")
	}
	if l, ok := s.listeners[ip]; ok && l.subnet.String() == subnet.String() {
		s.lastIP = ip
		return nil
	} else if ok {
		// The address now belongs to another network (the old one went,
		// a new one took its address): serve the new subnet.
		s.stopLocked(ip, "the address moved to another network")
	}
	cert, err := s.ca.ServerCert(addr)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(s.port)))
	if err != nil && s.port != 0 {
		s.log.Warn("git service port taken, picking another (containers granted before a restart must be granted again)", "ip", ip, "port", s.port, "err", err)
		ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(ip, "0"))
	}
	if err != nil {
		return fmt.Errorf("git service: listen on %s: %w (is it the gateway of an existing network?)", ip, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	l := &listener{port: port, subnet: subnet, done: make(chan struct{})}
	l.srv = &http.Server{
		Handler: s,
		// Also the TLS handshake's bound. A body's is set per request
		// (bodyTime): a clone's answer may take longer than any fixed
		// read timeout would allow.
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		// Connection-level errors (TLS handshakes of scanners...) are
		// debug noise; they never carry request headers.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	own := &subnetListener{Listener: ln, subnet: subnet, log: s.log, ip: ip, conns: s.conns}
	tlsLn := tls.NewListener(own, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(tlsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("git service listener stopped", "ip", ip, "port", port, "err", err)
		}
	}()
	s.listeners[ip] = l
	s.ips[ip] = true
	s.lastIP = ip
	if s.port == 0 {
		// The first port chosen stays the preferred one; a fallback
		// port on one address does not move the others.
		s.port = port
	}
	if err := s.saveLocked(); err != nil {
		s.log.Warn("could not persist the git service's addresses", "err", err)
	}
	s.log.Info("git service listening", "addr", net.JoinHostPort(ip, strconv.Itoa(port)), "subnet", subnet.String())
	return nil
}

// Listening returns the addresses the service listens on, sorted.
func (s *Service) Listening() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ips []string
	for ip := range s.listeners {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	return ips
}

// stopLocked closes the listener on ip and forgets the address (also in
// grants.json). The server's shutdown runs on its own: s.mu is held.
func (s *Service) stopLocked(ip, why string) {
	l := s.listeners[ip]
	if l == nil {
		return
	}
	delete(s.listeners, ip)
	delete(s.ips, ip)
	if s.lastIP == ip {
		s.lastIP = ""
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			l.srv.Close()
		}
	}()
	if err := s.saveLocked(); err != nil {
		s.log.Warn("could not persist the git service's addresses", "err", err)
	}
	s.log.Info("git service stopped listening", "ip", ip, "why", why)
}

// sweep stops listening on addresses the host no longer has, or that now
// belong to another subnet (their network was removed).
func (s *Service) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ip, l := range s.listeners {
		subnet, err := hostSubnet(net.ParseIP(ip))
		switch {
		case err != nil:
			s.stopLocked(ip, "the host no longer has the address (its network is gone)")
		case subnet.String() != l.subnet.String():
			s.stopLocked(ip, "the address moved to another network")
		}
	}
}

// sweepLoop runs sweep every interval until stop is closed.
func (s *Service) sweepLoop(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// Close stops every listener (in-flight requests get a few seconds).
func (s *Service) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stopSweep)
	}
	s.closed = true
	ls := s.listeners
	s.listeners = map[string]*listener{}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, l := range ls {
		if err := l.srv.Shutdown(ctx); err != nil {
			errs = append(errs, l.srv.Close())
		}
		<-l.done
	}
	return errors.Join(errs...)
}

// hostSubnet returns the subnet of the host interface address ip.
func hostSubnet(ip net.IP) (*net.IPNet, error) {
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

// subnetListener drops connections from outside subnet, and those past
// the limits of conns, as they are accepted: a flood from one sandbox
// holds its own share of the daemon's file descriptors, no more.
type subnetListener struct {
	net.Listener
	subnet *net.IPNet
	log    *slog.Logger
	ip     string
	conns  *connLimiter
}

func (l *subnetListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !l.subnet.Contains(a.IP) {
			l.log.Debug("git service: connection from outside the gateway's network refused", "gateway", l.ip, "from", c.RemoteAddr().String())
			c.Close()
			continue
		}
		peer := a.IP.String()
		if !l.conns.admit(peer) {
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.conns.release(peer) }}, nil
	}
}

// Port is the port the service listens on at ip (0 when it does not).
func (s *Service) Port(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listeners[ip]; l != nil {
		return l.port
	}
	return 0
}
