package sandboxnet

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
)

// Options are what the sandboxes' network serves and where.
type Options struct {
	// Config gives egress.allow, agent.permission_policy (an ask socket
	// when it asks a person), engine.backend and, on a Swarm mode
	// cluster, git.address (the door's).
	Config *configs.Config
	// DataDir is the daemon's data directory: the sockets are under
	// Dir(DataDir), the door's certificate is the git service's CA.
	DataDir string
	// Git is the local-mode git service; nil in remote mode.
	Git *gitserve.Service
	// Models is the model gateway; nil without model keys.
	Models *gateway.Service
	// Budgets answers each sandbox's budget socket.
	Budgets contract.Budgets
	Log     *slog.Logger
}

// Net is the orchestrator's SandboxNet: containers without a network, the
// git service, the model gateway and the egress proxy on sockets of their
// own (one engine), or through a relay of their own to the door (Docker
// Swarm mode; door set).
type Net struct {
	sockets *egress.Sockets
	door    *egress.Door
	caPEM   []byte // the door's CA, for the relays
	base    []egress.Rule
	log     *slog.Logger

	asks    slot[contract.Asks]    // the inbox, on each sandbox's ask socket
	budgets slot[contract.Budgets] // the keeper of budgets, on each sandbox's budget socket
	asker   slot[egress.Asker]     // the inbox, for the proxy's questions (egress.ask)
	stories slot[func(contract.Sandbox) []string]
	grants  *egress.Grants
	ask     bool          // egress.ask
	wait    time.Duration // egress.ask_wait

	mu    sync.Mutex
	rules map[contract.Sandbox][]egress.Rule
	deny  map[contract.Sandbox]func(method, host string, port int, reason string)
	repos map[contract.Sandbox]string // the repository of each open sandbox
	// sources are each open sandbox's rules by where they come from
	sources map[contract.Sandbox]ruleSources
}

// New serves the sandboxes' sockets under Dir(o.DataDir): the egress
// proxy, the budget endpoint, the ask endpoint when the policy asks a
// person, and the git service and the model gateway when they run. On a
// Swarm mode cluster (engine.backend swarm) they are served behind the
// door on git.address; without one the cluster's sandboxes cannot be
// sealed, and New logs so and returns nil: they keep their network.
func New(o Options) (*Net, error) {
	if o.Config.Engine.Backend == configs.BackendSwarm {
		if o.Config.Git.Address == "" {
			o.Log.Warn("git.address is empty: the cluster's sandboxes keep a route out (no egress proxy, no default-deny); set git.address to an IP of this machine every node reaches to confine them")
			return nil, nil
		}
		return newSwarmNet(o)
	}
	return newSandboxNet(o)
}

// newSandboxNet serves the sandboxes of one engine on sockets of their own.
func newSandboxNet(o Options) (*Net, error) {
	n := newNet(o)
	s, err := egress.NewSockets(Dir(o.DataDir), o.Log, n.services(o.Config, o.Git, o.Models)...)
	if err != nil {
		return nil, err
	}
	n.sockets = s
	return n, nil
}

func newNet(o Options) *Net {
	n := &Net{base: defaultEgress(o.Config, o.Log), log: o.Log, rules: map[contract.Sandbox][]egress.Rule{},
		deny: map[contract.Sandbox]func(string, string, int, string){}, repos: map[contract.Sandbox]string{},
		sources: map[contract.Sandbox]ruleSources{}, ask: o.Config.Egress.Ask, wait: o.Config.Egress.AskWait}
	n.grants = egress.NewGrants(n.storyRuns)
	n.budgets.set(o.Budgets)
	return n
}

// services are what a sandbox reaches: the egress proxy, and the git
// service and the model gateway when they run.
func (n *Net) services(cfg *configs.Config, git *gitserve.Service, models *gateway.Service) []egress.Service {
	log := n.log
	proxy := egress.NewProxy(egress.Options{Log: log, OnDeny: n.denied, Asker: n, AskWait: n.askWait})
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
	if AsksAPerson(cfg) {
		services = append(services, egress.Service{
			Name:  contract.AskSocket,
			Port:  func() int { return contract.AskPort },
			Serve: func(ln net.Listener, sb contract.Sandbox) error { return n.serveAsk(ln, sb) },
		})
	}
	return services
}

// Dir is where the sandboxes' socket directories are under the daemon's
// data directory (the warm pool's are below it).
func Dir(dataDir string) string { return filepath.Join(dataDir, "net") }

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

// rulesOf are sb's rules: its own (Open's) and what a person granted.
func (n *Net) rulesOf(sb contract.Sandbox) []egress.Rule {
	n.mu.Lock()
	own := n.rules[sb]
	n.mu.Unlock()
	if granted := n.grants.Rules(sb); len(granted) > 0 {
		return append(slices.Clip(own), granted...)
	}
	return own
}

func (n *Net) denied(d egress.Denial) {
	n.mu.Lock()
	f := n.deny[d.Sandbox]
	n.mu.Unlock()
	if f != nil {
		f(d.Method, d.Host, d.Port, d.Reason)
	}
}

// Open serves the container's sockets with its rules: egress.allow, what
// its repository's .aimi/config.yaml adds, and in remote mode its origin.
func (n *Net) Open(_ context.Context, s orchestrator.NetSandbox) (orchestrator.NetGrant, error) {
	sb := contract.Sandbox{Swarm: s.SwarmID, Container: s.Container}
	rules := slices.Clone(n.base)
	src := ruleSources{config: names(n.base), ask: n.asksFor(s.Repo)}
	if extra, err := configs.RepoEgressAllow(s.Repo); err != nil {
		n.log.Warn("the repository's egress.allow is ignored", "repo", s.Repo, "err", err)
	} else if len(extra) > 0 {
		var names []string
		for _, r := range extra {
			names = append(names, r.String())
		}
		n.log.Info("the repository adds egress rules", "repo", s.Repo, "container", s.Container, "rules", names)
		rules = append(rules, extra...)
		src.repo = names
	}
	if r, ok := originRule(s.RepoURL); ok {
		rules = append(rules, r)
		src.origin = []string{r.String()}
	}
	n.mu.Lock()
	n.rules[sb], n.deny[sb], n.repos[sb], n.sources[sb] = rules, s.Deny, s.Repo, src
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
func (n *Net) Close(sb contract.Sandbox) {
	if n.door != nil {
		n.door.Close(sb)
	} else {
		n.sockets.Close(sb)
	}
	n.mu.Lock()
	delete(n.rules, sb)
	delete(n.deny, sb)
	delete(n.repos, sb)
	delete(n.sources, sb)
	n.mu.Unlock()
	n.grants.EndContainer(sb)
}

// Forget removes the socket directory of a container the engine removed
// (dir: where it was served, when not its own).
func (n *Net) Forget(sb contract.Sandbox, dir string) {
	n.Close(sb)
	if n.sockets != nil {
		n.sockets.RemoveIn(sb, dir)
	}
}

// CloseAll stops serving every sandbox (the daemon stops).
func (n *Net) CloseAll() {
	if n.door != nil {
		n.door.CloseAll()
	} else {
		n.sockets.CloseAll()
	}
}

var _ orchestrator.SandboxNet = (*Net)(nil)
