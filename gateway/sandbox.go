package gateway

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// SandboxPort is the loopback port, inside a container without a network,
// where its runner serves the gateway (forwarding to the container's own
// socket, ServeSandbox): the base URLs of such a container name it.
const SandboxPort = 3129

const loopback = "127.0.0.1"

type sandboxKey struct{}

// ServeSandbox answers one container's connections on ln, a socket only
// that container reaches (a unix socket in its own directory), until ln is
// closed. The socket says who is asking: a placeholder is accepted only
// when it is that container's. The certificate names 127.0.0.1, where the
// container's runner serves the socket (SandboxPort).
func (s *Service) ServeSandbox(ln net.Listener, sb contract.Sandbox) error {
	cert, err := s.loopbackCert()
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       s.limits.Idle,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, sandboxKey{}, sb)
		},
	}
	peer := "sandbox:" + sb.Swarm + "/" + sb.Container
	lim := svclisten.BoundWithin(ln, s.conns, peer, contract.ChannelConns(contract.ServiceModels), svclisten.Refuse)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.sandboxes[srv] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sandboxes, srv)
		s.mu.Unlock()
	}()
	return srv.Serve(tls.NewListener(lim, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}))
}

// loopbackCert issues (once) the certificate for 127.0.0.1.
func (s *Service) loopbackCert() (tls.Certificate, error) {
	s.loopOnce.Do(func() {
		s.loopCert, s.loopErr = s.ca.ServerCert(net.ParseIP(loopback))
	})
	return s.loopCert, s.loopErr
}

// sandboxServers are the servers of ServeSandbox, shut down by Close.
type sandboxServers struct {
	sandboxes map[*http.Server]bool
	loopOnce  sync.Once
	loopCert  tls.Certificate
	loopErr   error
}

// closeSandboxes shuts down every ServeSandbox server (s.mu held by the
// caller is released first: Shutdown waits).
func closeSandboxes(ctx context.Context, srvs []*http.Server) {
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
}
