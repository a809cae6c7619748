package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aimi-tools/swarm/internal/svclisten"
)

// newListeners makes the gateway's listener set (svclisten).
func (s *Service) newListeners() *svclisten.Set {
	return svclisten.New(svclisten.Options{
		Name: "model gateway", Log: s.log,
		Cert: s.ca.ServerCert, Handler: s, Conns: s.conns,
		IdleTimeout: s.limits.Idle, MaxHeaderBytes: s.limits.MaxHeaderBytes,
		NextProtos: []string{"http/1.1"},
		PortTaken:  "model gateway port taken, picking another (containers started before must be started again)",
	})
}

// ListenOn starts a TLS listener on ip (a sandbox network's gateway, or
// git.address on a cluster) with a certificate for that IP signed by the
// daemon's CA. The port is the one used before when it is free. Calling it
// again for the same ip does nothing. Only connections from ip's own
// subnet are accepted: a sandbox of another network reaches every address
// of the host and must be refused on all but its own.
func (s *Service) ListenOn(ctx context.Context, ip string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("model gateway: ListenOn after Close")
	}
	_, changed, err := s.listen.Listen(ctx, ip)
	if changed {
		if serr := s.saveLocked(); serr != nil {
			s.log.Warn("could not persist the model gateway's addresses", "err", serr)
		}
	}
	return err
}

// Listening returns the addresses (ip:port) the gateway serves, sorted:
// what a sandbox network must let its sandboxes reach.
func (s *Service) Listening() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listen.Addrs()
}

// sweep stops serving addresses the host no longer has (their network
// was removed) or that moved to another subnet.
func (s *Service) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listen.Sweep()
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
	shutdown := s.listen.Detach()
	var sbs []*http.Server
	for srv := range s.sandboxes {
		sbs = append(sbs, srv)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closeSandboxes(ctx, sbs)
	return shutdown(ctx)
}
