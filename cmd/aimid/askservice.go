package main

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// asksAPerson reports whether agent.permission_policy asks a person.
func asksAPerson(cfg *configs.Config) bool {
	return strings.HasPrefix(cfg.Agent.PermissionPolicy, "ask")
}

// slot holds a service the daemon builds after the sockets (the Manager
// needs those first): the inbox, the keeper of budgets. Before it is set,
// requests get 503 and the runner sends them again.
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

// serveOwn answers POST path on one of sb's own sockets, in either git
// mode: the socket is bind-mounted into sb's container only, so it says who
// asks (as the model gateway's does), and no token is needed. serve is nil
// while the daemon is starting; at most conns connections are served.
func (n *sandboxNet) serveOwn(ln net.Listener, sb contract.Sandbox, path, what string, conns int, serve func() func(http.ResponseWriter, *http.Request, gitserve.Caller)) error {
	srv := &http.Server{ReadHeaderTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			f(w, r, gitserve.Caller{RepoPath: repo, SwarmID: sb.Swarm, Container: sb.Container})
		})}
	return srv.Serve(svclisten.Bound(ln, conns, svclisten.Wait))
}

// serveAsk answers permission requests on sb's own ask socket.
func (n *sandboxNet) serveAsk(ln net.Listener, sb contract.Sandbox) error {
	return n.serveOwn(ln, sb, contract.AskPath, "permission requests", contract.ChannelConns(contract.AskSocket),
		func() func(http.ResponseWriter, *http.Request, gitserve.Caller) {
			if a := n.asks.get(); a != nil {
				return a.ServeAsk
			}
			return nil
		})
}

// serveBudget answers budget questions on sb's own budget socket.
func (n *sandboxNet) serveBudget(ln net.Listener, sb contract.Sandbox) error {
	return n.serveOwn(ln, sb, contract.BudgetPath, "budget questions", contract.ChannelConns(contract.BudgetSocket),
		func() func(http.ResponseWriter, *http.Request, gitserve.Caller) {
			if b := n.budgets.get(); b != nil {
				return b.ServeBudget
			}
			return nil
		})
}
