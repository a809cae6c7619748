package gitserve

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

type sandboxKey struct{}

// ServeSandbox answers one container's connections on ln, a socket only
// that container reaches (a unix socket in its own directory, or its
// relay's stream behind the door), until ln is closed. The socket says
// who is asking: a token is accepted only when it is that container's,
// whatever address the request comes from. The certificate names
// 127.0.0.1, where the container's runner serves the socket.
func (s *Service) ServeSandbox(ln net.Listener, sb contract.Sandbox) error {
	cert, err := s.ca.ServerCert(net.ParseIP("127.0.0.1"))
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, sandboxKey{}, sb)
		},
	}
	lim := svclisten.BoundWithin(ln, s.conns, "sandbox:"+sb.Swarm+"/"+sb.Container, contract.ChannelConns(contract.ServiceGit), svclisten.Refuse)
	return srv.Serve(tls.NewListener(lim, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
}

// fromSandbox reports whether r came through a container's own socket
// (ServeSandbox), and whether rec is that container's.
func fromSandbox(r *http.Request, rec record) (through, own bool) {
	who, ok := r.Context().Value(sandboxKey{}).(contract.Sandbox)
	if !ok {
		return false, false
	}
	return true, who == rec.sandbox()
}
