package main

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
)

// sandboxNet is the orchestrator's SandboxNet: containers without a
// network, the git service, the model gateway and the egress proxy on
// sockets of their own (one engine), or through a relay of their own to
// the door (Docker Swarm mode; door set).
type sandboxNet struct {
	sockets *egress.Sockets
	door    *egress.Door
	caPEM   []byte // the door's CA, for the relays
	base    []egress.Rule
	log     *slog.Logger

	asks    slot[gitserve.Asks]    // the inbox, on each sandbox's ask socket
	budgets slot[gitserve.Budgets] // the keeper of budgets, on each sandbox's budget socket

	mu    sync.Mutex
	rules map[contract.Sandbox][]egress.Rule
	deny  map[contract.Sandbox]func(method, host string, port int, reason string)
	repos map[contract.Sandbox]string // the repository of each open sandbox
}

// newSandboxNet serves the sandboxes' sockets under dataDir/net: the
// egress proxy, and the git service and the model gateway when they run.
func newSandboxNet(cfg *configs.Config, dataDir string, git *gitserve.Service, models *gateway.Service, log *slog.Logger) (*sandboxNet, error) {
	n := newNet(cfg, log)
	s, err := egress.NewSockets(sandboxNetDir(dataDir), log, n.services(cfg, git, models)...)
	if err != nil {
		return nil, err
	}
	n.sockets = s
	return n, nil
}

func newNet(cfg *configs.Config, log *slog.Logger) *sandboxNet {
	return &sandboxNet{base: defaultEgress(cfg, log), log: log, rules: map[contract.Sandbox][]egress.Rule{},
		deny: map[contract.Sandbox]func(string, string, int, string){}, repos: map[contract.Sandbox]string{}}
}

// services are what a sandbox reaches: the egress proxy, and the git
// service and the model gateway when they run.
func (n *sandboxNet) services(cfg *configs.Config, git *gitserve.Service, models *gateway.Service) []egress.Service {
	log := n.log
	proxy := egress.NewProxy(egress.Options{Log: log, OnDeny: n.denied})
	services := []egress.Service{{
		Name: contract.ServiceProxy,
		Port: func() int { return contract.ProxyPort },
		Serve: func(ln net.Listener, sb contract.Sandbox) error {
			return proxy.Serve(ln, sb, func() []egress.Rule { return n.rulesOf(sb) })
		},
	}}
	if git != nil {
		// Served on the socket itself: the socket says which container
		// calls, and a token works from its own container only. The
		// service bounds the sandbox's connections (its channel's).
		services = append(services, egress.Service{
			Name:  contract.ServiceGit,
			Port:  func() int { return git.Port(serviceIP) },
			Serve: git.ServeSandbox,
		})
	}
	if models != nil {
		// Served on the socket itself: the socket says which container
		// calls, and a placeholder works from its own container only.
		services = append(services, egress.Service{
			Name:  contract.ServiceModels,
			Port:  func() int { return gateway.SandboxPort },
			Serve: models.ServeSandbox,
		})
	}
	// Always: a repository's own config may set a budget.
	services = append(services, egress.Service{
		Name:  contract.BudgetSocket,
		Port:  func() int { return contract.BudgetPort },
		Serve: func(ln net.Listener, sb contract.Sandbox) error { return n.serveBudget(ln, sb) },
	})
	if asksAPerson(cfg) {
		services = append(services, egress.Service{
			Name:  contract.AskSocket,
			Port:  func() int { return contract.AskPort },
			Serve: func(ln net.Listener, sb contract.Sandbox) error { return n.serveAsk(ln, sb) },
		})
	}
	return services
}

// sandboxNetDir is where the sandboxes' socket directories are.
func sandboxNetDir(dataDir string) string { return filepath.Join(dataDir, "net") }

// serviceIP is where the git service listens for sandboxes without a
// network (the orchestrator's choice): the address their grants name, and
// its port the one their runner serves the git socket on.
const serviceIP = "127.0.0.1"

// defaultEgress is egress.allow: nothing else by default. Model APIs are
// reached through the model gateway, from the daemon. The user wrote these
// (a repository's entries are added per sandbox): their names may resolve
// into a private range.
func defaultEgress(cfg *configs.Config, log *slog.Logger) []egress.Rule {
	rules := make([]egress.Rule, 0, len(cfg.Egress.Allow))
	var names []string
	for _, r := range cfg.Egress.Allow {
		rules = append(rules, r.UserNamed())
		names = append(names, r.String())
	}
	log.Info("egress allowed", "rules", names)
	return rules
}

func (n *sandboxNet) rulesOf(sb contract.Sandbox) []egress.Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rules[sb]
}

func (n *sandboxNet) denied(d egress.Denial) {
	n.mu.Lock()
	f := n.deny[d.Sandbox]
	n.mu.Unlock()
	if f != nil {
		f(d.Method, d.Host, d.Port, d.Reason)
	}
}

// Open serves the container's sockets with its rules: egress.allow, what
// its repository's .aimi/config.yaml adds, and in remote mode its origin.
func (n *sandboxNet) Open(_ context.Context, s orchestrator.NetSandbox) (orchestrator.NetGrant, error) {
	sb := contract.Sandbox{Swarm: s.SwarmID, Container: s.Container}
	rules := slices.Clone(n.base)
	if extra, err := configs.RepoEgressAllow(s.Repo); err != nil {
		n.log.Warn("the repository's egress.allow is ignored", "repo", s.Repo, "err", err)
	} else if len(extra) > 0 {
		var names []string
		for _, r := range extra {
			names = append(names, r.String())
		}
		n.log.Info("the repository adds egress rules", "repo", s.Repo, "container", s.Container, "rules", names)
		rules = append(rules, extra...)
	}
	if r, ok := originRule(s.RepoURL); ok {
		rules = append(rules, r)
	}
	n.mu.Lock()
	n.rules[sb], n.deny[sb], n.repos[sb] = rules, s.Deny, s.Repo
	n.mu.Unlock()
	var g orchestrator.NetGrant
	forward := ""
	if n.door != nil {
		n.door.Open(sb)
		forward = n.door.Forward()
		g.Relay = &engine.Relay{Door: n.door.Addr(), Key: n.door.Key(sb), CA: n.caPEM, Forward: forward}
	} else {
		dir, err := n.sockets.OpenIn(sb, s.Dir)
		if err != nil {
			return orchestrator.NetGrant{}, err
		}
		g.Dir, forward = dir, n.sockets.Forward()
	}
	proxy := "http://127.0.0.1:" + strconv.Itoa(contract.ProxyPort)
	env := []string{contract.EnvNetForward + "=" + forward}
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		env = append(env, k+"="+proxy)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		env = append(env, k+"=127.0.0.1,localhost,::1")
	}
	g.Env = env
	return g, nil
}

// originRule allows a remote-mode container's origin (its host and port),
// a host the user named: a git server on the company's LAN is reached.
func originRule(repoURL string) (egress.Rule, bool) {
	u, err := url.Parse(repoURL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return egress.Rule{}, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = "[" + host + "]"
	}
	r, err := egress.ParseRule(host + ":" + port)
	return r.UserNamed(), err == nil
}

// Close stops serving a finished container.
func (n *sandboxNet) Close(sb contract.Sandbox) {
	if n.door != nil {
		n.door.Close(sb)
	} else {
		n.sockets.Close(sb)
	}
	n.mu.Lock()
	delete(n.rules, sb)
	delete(n.deny, sb)
	delete(n.repos, sb)
	n.mu.Unlock()
}

// Forget removes the socket directory of a container the engine removed
// (dir: where it was served, when not its own).
func (n *sandboxNet) Forget(sb contract.Sandbox, dir string) {
	n.Close(sb)
	if n.sockets != nil {
		n.sockets.RemoveIn(sb, dir)
	}
}

// closeAll stops serving every sandbox (the daemon stops).
func (n *sandboxNet) closeAll() {
	if n.door != nil {
		n.door.CloseAll()
	} else {
		n.sockets.CloseAll()
	}
}

var _ orchestrator.SandboxNet = (*sandboxNet)(nil)
