package gitserve

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// newListeners makes the service's serving shell (svclisten): the port is
// the one used before (also before a daemon restart) when it is free.
func (s *Service) newListeners() *svclisten.Shell {
	return svclisten.NewShell(svclisten.Options{Name: "git service", Channel: contract.ServiceGit,
		Log: s.log, Lock: &s.mu, Persist: s.stageLocked, Cert: s.ca.ServerCert, Handler: s, Conns: s.conns,
		// A body's read bound is set per request (bodyTime): a clone's
		// answer may take longer than any fixed read timeout would allow.
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10})
}

// ListenOn starts a TLS listener on ip (the swarm network's gateway): see
// svclisten.Shell.ListenOn. The most recent ip is the one Grant uses when
// the caller names no gateway.
func (s *Service) ListenOn(ctx context.Context, ip string) error { return s.listen.ListenOn(ctx, ip) }

// Listening returns the addresses the service listens on, sorted.
func (s *Service) Listening() []string { return s.listen.Listening() }

// Close stops every listener and every container's socket (in-flight
// requests get a few seconds).
func (s *Service) Close() error {
	err := s.listen.Close()
	s.workspaces.stop()
	return err
}

// Port is the port the service listens on at ip (0 when it does not).
func (s *Service) Port(ip string) int { return s.listen.Port(ip) }

// ServeSandbox answers one container's connections on ln, a socket only
// that container reaches, until ln is closed: a token is accepted only
// when it is that container's, whatever address the request comes from
// (see svclisten.Shell.ServeSandbox).
func (s *Service) ServeSandbox(ln net.Listener, sb contract.Sandbox) error {
	return s.listen.ServeSandbox(ln, sb)
}

// fromSandbox reports whether r came through a container's own socket
// (ServeSandbox), and whether rec is that container's.
func fromSandbox(r *http.Request, rec record) (through, own bool) {
	who, ok := svclisten.SandboxOf(r.Context())
	if !ok {
		return false, false
	}
	return true, who == rec.sandbox()
}
