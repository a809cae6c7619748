package gitserve

import (
	"context"
	"errors"
	"time"

	"github.com/aimi-tools/swarm/internal/svclisten"
)

// DefaultSweepInterval is how often the service looks for listening
// addresses the host no longer has (the swarm network was removed: by
// cleanup, by `docker network prune`, by an engine restart).
const DefaultSweepInterval = 30 * time.Second

// newListeners makes the service's listener set (svclisten): the port is
// the one used before (also before a daemon restart) when it is free.
func (s *Service) newListeners() *svclisten.Set {
	return svclisten.New(svclisten.Options{
		Name: "git service", Log: s.log,
		Cert:    s.ca.ServerCert,
		Handler: s, Conns: s.conns,
		// A body's read bound is set per request (bodyTime): a clone's
		// answer may take longer than any fixed read timeout would allow.
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		PortTaken: "git service port taken, picking another (containers granted before a restart must be granted again)",
	})
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("git service: ListenOn after Close")
	}
	ip, changed, err := s.listen.Listen(ctx, ip)
	if err == nil {
		s.lastIP = ip
	} else if s.lastIP == ip && s.listen.Port(ip) == 0 {
		s.lastIP = ""
	}
	var saved func() error
	if changed {
		saved = s.stageLocked()
	}
	s.mu.Unlock()
	if saved != nil {
		if serr := saved(); serr != nil {
			s.log.Warn("could not persist the git service's addresses", "err", serr)
		}
	}
	return err
}

// Listening returns the addresses the service listens on, sorted.
func (s *Service) Listening() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listen.Listening()
}

// sweep stops listening on addresses the host no longer has, or that now
// belong to another subnet (their network was removed).
func (s *Service) sweep() {
	s.mu.Lock()
	gone := s.listen.Sweep()
	for _, ip := range gone {
		if s.lastIP == ip {
			s.lastIP = ""
		}
	}
	if len(gone) == 0 {
		s.mu.Unlock()
		return
	}
	saved := s.stageLocked()
	s.mu.Unlock()
	if err := saved(); err != nil {
		s.log.Warn("could not persist the git service's addresses", "err", err)
	}
}

// Close stops every listener (in-flight requests get a few seconds).
func (s *Service) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stopSweep)
	}
	s.closed = true
	shutdown := s.listen.Detach()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := shutdown(ctx)
	s.workspaces.stop()
	return err
}

// Port is the port the service listens on at ip (0 when it does not).
func (s *Service) Port(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listen.Port(ip)
}
