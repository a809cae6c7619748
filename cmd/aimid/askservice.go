package main

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/gitserve"
)

// asksPerSandbox bounds one sandbox's open connections to its ask socket:
// a runner holds one per waiting story.
const asksPerSandbox = 16

// asksAPerson reports whether agent.permission_policy asks a person.
func asksAPerson(cfg *configs.Config) bool {
	return strings.HasPrefix(cfg.Agent.PermissionPolicy, "ask")
}

// askSlot holds the inbox once the daemon built it (after the sockets,
// which the Manager needs first); before, requests get 503 and the runner
// sends them again.
type askSlot struct {
	mu   sync.Mutex
	asks gitserve.Asks
}

func (s *askSlot) set(a gitserve.Asks) {
	s.mu.Lock()
	s.asks = a
	s.mu.Unlock()
}

func (s *askSlot) get() gitserve.Asks {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asks
}

// serveAsk answers permission requests on sb's own ask socket, in either
// git mode: the socket is bind-mounted into sb's container only, so it says
// who asks (as the model gateway's does), and no token is needed.
func (n *sandboxNet) serveAsk(ln net.Listener, sb egress.Sandbox) error {
	srv := &http.Server{ReadHeaderTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a := n.asks.get()
			switch {
			case r.URL.Path != contract.AskPath || r.Method != http.MethodPost:
				http.Error(w, "aimi: not found (POST "+contract.AskPath+")", http.StatusNotFound)
				return
			case a == nil:
				http.Error(w, "aimi: permission requests are not taken yet (the daemon is starting); try again", http.StatusServiceUnavailable)
				return
			}
			n.mu.Lock()
			repo := n.repos[sb]
			n.mu.Unlock()
			a.ServeAsk(w, r, gitserve.Caller{RepoPath: repo, SwarmID: sb.Swarm, Container: sb.Container})
		})}
	return srv.Serve(egress.LimitListener(ln, asksPerSandbox))
}

// budgetSlot holds the keeper of budgets once the daemon set it; before,
// questions get 503 and the runner asks again.
type budgetSlot struct {
	mu sync.Mutex
	b  gitserve.Budgets
}

func (s *budgetSlot) set(b gitserve.Budgets) {
	s.mu.Lock()
	s.b = b
	s.mu.Unlock()
}

func (s *budgetSlot) get() gitserve.Budgets {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// serveBudget answers budget questions on sb's own budget socket, in
// either git mode: as on the ask socket, the socket says who asks. The
// runner asks once per story boundary, so a few connections are enough.
func (n *sandboxNet) serveBudget(ln net.Listener, sb egress.Sandbox) error {
	srv := &http.Server{ReadHeaderTimeout: 15 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := n.budgets.get()
			switch {
			case r.URL.Path != contract.BudgetPath || r.Method != http.MethodPost:
				http.Error(w, "aimi: not found (POST "+contract.BudgetPath+")", http.StatusNotFound)
				return
			case b == nil:
				http.Error(w, "aimi: budget questions are not taken yet (the daemon is starting); try again", http.StatusServiceUnavailable)
				return
			}
			n.mu.Lock()
			repo := n.repos[sb]
			n.mu.Unlock()
			b.ServeBudget(w, r, gitserve.Caller{RepoPath: repo, SwarmID: sb.Swarm, Container: sb.Container})
		})}
	return srv.Serve(egress.LimitListener(ln, 4))
}
