package gateway

import (
	"context"
	"net"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// SandboxPort is the loopback port, inside a container without a network,
// where its runner serves the gateway (forwarding to the container's own
// socket, ServeSandbox): the base URLs of such a container name it.
const SandboxPort = 3129

const loopback = "127.0.0.1"

// newListeners makes the gateway's serving shell (svclisten).
func (s *Service) newListeners() *svclisten.Shell {
	return svclisten.NewShell(svclisten.Options{Name: "model gateway", Channel: contract.ServiceModels,
		Log: s.log, Lock: &s.mu, Persist: s.persistLocked, Cert: s.ca.ServerCert, Handler: s, Conns: s.conns,
		IdleTimeout: s.limits.Idle, MaxHeaderBytes: s.limits.MaxHeaderBytes})
}

// persistLocked writes the grants and the addresses at once, under s.mu as
// every write of the gateway's file.
func (s *Service) persistLocked() (saved func() error) {
	err := s.saveLocked()
	return func() error { return err }
}

// ListenOn starts a TLS listener on ip (a sandbox network's gateway, or
// git.address on a cluster): see svclisten.Shell.ListenOn.
func (s *Service) ListenOn(ctx context.Context, ip string) error { return s.listen.ListenOn(ctx, ip) }

// Listening returns the addresses (ip:port) the gateway serves, sorted:
// what a sandbox network must let its sandboxes reach.
func (s *Service) Listening() []string { return s.listen.Addrs() }

// Close stops every listener and every container's socket; in-flight
// answers get a few seconds.
func (s *Service) Close() error { return s.listen.Close() }

// ServeSandbox answers one container's connections on ln, a socket only
// that container reaches, until ln is closed: a placeholder is accepted
// only when it is that container's (see svclisten.Shell.ServeSandbox). The
// certificate names 127.0.0.1, where the container's runner serves the
// socket (SandboxPort).
func (s *Service) ServeSandbox(ln net.Listener, sb contract.Sandbox) error {
	return s.listen.ServeSandbox(ln, sb)
}
