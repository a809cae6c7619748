package gateway

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
	"sync"
	"time"
)

// listener serves one sandbox network's gateway address.
type listener struct {
	srv    *http.Server
	port   int
	subnet *net.IPNet
	done   chan struct{}
}

// ListenOn starts a TLS listener on ip (a sandbox network's gateway, or
// git.address on a cluster) with a certificate for that IP signed by the
// daemon's CA. The port is the one used before when it is free. Calling it
// again for the same ip does nothing. Only connections from ip's own
// subnet are accepted: a sandbox of another network reaches every address
// of the host and must be refused on all but its own.
func (s *Service) ListenOn(ctx context.Context, ip string) error {
	addr := net.ParseIP(ip)
	if addr == nil {
		return fmt.Errorf("model gateway: listen on %q: not an IP address", ip)
	}
	ip = addr.String()
	subnet, err := hostSubnet(addr)
	if err != nil {
		return fmt.Errorf("model gateway: listen on %s: %w (is it the gateway of an existing network?)", ip, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("model gateway: ListenOn after Close")
	}
	if l, ok := s.listeners[ip]; ok && l.subnet.String() == subnet.String() {
		return nil
	} else if ok {
		s.stopLocked(ip)
	}
	cert, err := s.ca.ServerCert(addr)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(s.port)))
	if err != nil && s.port != 0 {
		s.log.Warn("model gateway port taken, picking another (containers started before must be started again)", "ip", ip, "port", s.port, "err", err)
		ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(ip, "0"))
	}
	if err != nil {
		return fmt.Errorf("model gateway: listen on %s: %w", ip, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	l := &listener{port: port, subnet: subnet, done: make(chan struct{})}
	l.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       s.limits.Idle,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		// Connection errors (TLS handshakes of scanners) carry no
		// request headers; debug noise.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	own := &subnetListener{Listener: ln, subnet: subnet, conns: s.conns}
	tlsLn := tls.NewListener(own, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(tlsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("model gateway listener stopped", "ip", ip, "port", port, "err", err)
		}
	}()
	s.listeners[ip] = l
	s.ips[ip] = true
	if s.port == 0 {
		s.port = port
	}
	if err := s.saveLocked(); err != nil {
		s.log.Warn("could not persist the model gateway's addresses", "err", err)
	}
	s.log.Info("model gateway listening", "addr", net.JoinHostPort(ip, strconv.Itoa(port)), "subnet", subnet.String())
	return nil
}

// Listening returns the addresses (ip:port) the gateway serves, sorted:
// what a sandbox network must let its sandboxes reach.
func (s *Service) Listening() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for ip, l := range s.listeners {
		out = append(out, net.JoinHostPort(ip, strconv.Itoa(l.port)))
	}
	slices.Sort(out)
	return out
}

// stopLocked closes the listener on ip (s.mu held).
func (s *Service) stopLocked(ip string) {
	l := s.listeners[ip]
	if l == nil {
		return
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
}

// sweep stops serving addresses the host no longer has (their network
// was removed) or that moved to another subnet.
func (s *Service) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ip, l := range s.listeners {
		if subnet, err := hostSubnet(net.ParseIP(ip)); err != nil || subnet.String() != l.subnet.String() {
			s.stopLocked(ip)
			s.log.Info("model gateway stopped listening: the address is gone or moved", "ip", ip)
		}
	}
	if err := s.saveLocked(); err != nil {
		s.log.Warn("could not persist the model gateway's addresses", "err", err)
	}
}

// Close stops every listener; in-flight answers get a few seconds.
func (s *Service) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stopSweep)
	}
	s.closed = true
	ls := s.listeners
	s.listeners = map[string]*listener{}
	var sbs []*http.Server
	for srv := range s.sandboxes {
		sbs = append(sbs, srv)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closeSandboxes(ctx, sbs)
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

// subnetListener closes connections from outside subnet and those past
// the connection limits as they are accepted.
type subnetListener struct {
	net.Listener
	subnet *net.IPNet
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

// connLimiter counts connections per source address and in total.
type connLimiter struct {
	max, perPeer int
	mu           sync.Mutex
	total        int
	peers        map[string]int
	refused      int
	log          *slog.Logger
	lastLog      time.Time
}

func (c *connLimiter) admit(ip string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= c.max || c.peers[ip] >= c.perPeer {
		c.refused++
		if time.Since(c.lastLog) >= 10*time.Second {
			c.log.Warn("model gateway: connections refused: over the limit per source address or in total",
				"refused", c.refused, "perSource", c.perPeer, "total", c.max)
			c.refused, c.lastLog = 0, time.Now()
		}
		return false
	}
	c.total++
	c.peers[ip]++
	return true
}

func (c *connLimiter) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.peers[ip]--; c.peers[ip] <= 0 {
		delete(c.peers, ip)
	}
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
