package sandboxnet

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// AsksAPerson reports whether agent.permission_policy asks a person: the
// sandboxes then get an ask socket, and the daemon an inbox behind it.
func AsksAPerson(cfg *configs.Config) bool {
	return strings.HasPrefix(cfg.Agent.PermissionPolicy, "ask")
}

// slot holds a service behind the sandboxes' sockets that may come after
// them: the inbox (built after the Manager, which needs the sockets
// first), the keeper of budgets. Before it is set, requests get 503 and
// the runner sends them again.
type slot[T any] struct {
	mu sync.Mutex
	v  T
}

func (s *slot[T]) set(v T) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
}

func (s *slot[T]) get() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// SetAsks puts the inbox behind every sandbox's ask socket (the inbox is
// built after the Manager, which needs the Net first); until then the ask
// socket answers 503 and the runner asks again.
func (n *Net) SetAsks(a contract.Asks) { n.asks.set(a) }

// serveOwn answers POST path on one of sb's own sockets, in either git
// mode: the socket is bind-mounted into sb's container only, so it says who
// asks (as the model gateway's does), and no token is needed. serve is nil
// while the daemon is starting; at most conns connections are served.
func (n *Net) serveOwn(ln net.Listener, sb contract.Sandbox, path, what string, conns int, serve func() func(http.ResponseWriter, *http.Request, contract.Caller)) error {
	srv := &http.Server{ReadHeaderTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		Handler: n.ownHandler(sb, path, what, serve)}
	return srv.Serve(svclisten.Bound(ln, conns, svclisten.Wait))
}

// ownHandler answers POST path for sb with serve (see serveOwn).
func (n *Net) ownHandler(sb contract.Sandbox, path, what string, serve func() func(http.ResponseWriter, *http.Request, contract.Caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := serve()
		switch {
		case r.URL.Path != path || r.Method != http.MethodPost:
			http.Error(w, "aimi: not found (POST "+path+")", http.StatusNotFound)
			return
		case f == nil:
			http.Error(w, "aimi: "+what+" are not taken yet (the daemon is starting); try again", http.StatusServiceUnavailable)
			return
		}
		n.mu.Lock()
		repo := n.repos[sb]
		n.mu.Unlock()
		f(w, r, contract.Caller{RepoPath: repo, SwarmID: sb.Swarm, Container: sb.Container})
	})
}

// serveAsk answers permission requests on sb's own ask socket.
func (n *Net) serveAsk(ln net.Listener, sb contract.Sandbox) error {
	return n.serveOwn(ln, sb, contract.AskPath, "permission requests", contract.ChannelConns(contract.AskSocket),
		func() func(http.ResponseWriter, *http.Request, contract.Caller) {
			if a := n.asks.get(); a != nil {
				return a.ServeAsk
			}
			return nil
		})
}
