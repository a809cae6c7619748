package aimid

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/pflag"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/inbox"
	"github.com/aimi-tools/swarm/internal/redact"
	"github.com/aimi-tools/swarm/metrics"
	"github.com/aimi-tools/swarm/notify"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/sandboxnet"
	"github.com/aimi-tools/swarm/usage/ledger"
	"github.com/aimi-tools/swarm/warmpool"
)

// shutdownTimeout bounds the clean stop: in-flight requests, then the
// supervisors letting go and the last journal and state flush.
const shutdownTimeout = 30 * time.Second

// Options are what aimid's own flags say; the config keys come from Flags.
type Options struct {
	Socket     string // empty: daemon.DefaultSocketPath
	DataDir    string // empty: daemon.DefaultDataDir
	UserConfig string // the user's config file ("-": none; empty: the default)
	// Instance is this daemon's name on the engine (label
	// contract.LabelDaemon): it adopts only containers carrying it.
	Instance  string
	DrainPool bool // remove the waiting warm pool sandboxes, then return
	// Flags are the config keys' flags (configs.AddFlags), parsed; nil:
	// none.
	Flags   *pflag.FlagSet
	Version string
	Logger  *slog.Logger // nil: slog.Default()
}

// Serve runs the daemon until ctx ends (a clean stop: containers keep
// running and are adopted at the next start) or it cannot go on.
func Serve(ctx context.Context, o Options) error {
	log := cmp.Or(o.Logger, slog.Default())
	loadOpts := configs.LoadOptions{Flags: o.Flags, UserConfigPath: o.UserConfig}
	cfg, err := loadConfig(loadOpts, log)
	if err != nil {
		return err
	}
	if err := defaultPaths(&o); err != nil {
		return err
	}

	// The socket first: a second daemon must fail before it touches any
	// container, or two daemons would supervise the same swarm.
	ln, err := daemon.Listen(o.Socket)
	if err != nil {
		return err
	}
	defer ln.Release()

	met := metrics.New()
	be, err := openBackend(ctx, cfg, o, log, met.EngineTransport)
	if err != nil {
		return err
	}
	defer be.close()

	// The instance next: the socket's lock only sees daemons of this socket,
	// and a daemon of the same instance with another socket and data dir
	// would adopt this one's swarms. Also before any container is touched.
	release, err := takeInstance(ctx, o, log)
	if err != nil {
		return err
	}
	defer release()

	pool, err := openPool(ctx, cfg, o, be, log) // claims settled before any adoption
	if err != nil || o.DrainPool {
		return err
	}
	meter, limits := ledger.New(cfg.Prices, log), notify.NewLimitNotices(log)
	git, models, closeServices, err := openServices(cfg, o, be, met, limits.Tee(meter), log)
	if err != nil {
		return err
	}
	defer closeServices()

	// The Manager's context is not ctx: a signal must lead to Shutdown (which
	// flushes), not to a cancel, which is what a crash looks like to it.
	life, cancelLife := context.WithCancel(context.Background())
	defer cancelLife()
	oc := managerConfig(cfg, o, be, git, models, log)
	closeNet, err := sealSandboxes(cfg, o.DataDir, git, models, openBudgets(cfg, loadOpts, git, models, meter, log), &oc, log)
	if err != nil {
		return err
	}
	defer closeNet()
	if err := engineSettings(ctx, cfg, be, &oc, met, log); err != nil {
		return err
	}
	var mgr *orchestrator.Manager
	ws, announceWorkspaces, closeWorkspaces := openWorkspaces(ctx, life, cfg, o, be, git, pool, &mgr, log)
	defer closeWorkspaces()
	oc.Workspaces = ws
	mgr, err = startManager(ctx, life, oc, be.eng, pool, cfg, func(m *orchestrator.Manager) { mgr = m; announceWorkspaces() })
	if err != nil {
		return err
	}
	meter.Attach(life, mgr.JournalUsage, mgr.NoteLimitWait)
	secrets := knownSecrets(cfg, os.Getenv, log)
	stopMetrics, err := observe(life, cfg, met, mgr, limits, secrets, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	inbox := openInbox(life, cfg, git, oc.Net, mgr, secrets, log)
	return serveAPI(ctx, o, ln, mgr, apiOptions(cfg, loadOpts, o, git != nil, pool, mgr, oc.Workspaces, inbox, log))
}

// apiOptions are what the daemon's API serves: the manager's swarms,
// their start preparation, the inbox, land and pick.
func apiOptions(cfg *configs.Config, loadOpts configs.LoadOptions, o Options, local bool, pool *warmpool.Pool, mgr *orchestrator.Manager, ws orchestrator.WorkspaceImages, inbox daemon.Inbox, log *slog.Logger) daemon.ServerOptions {
	return daemon.ServerOptions{
		ResolveRepo: orchestrator.ResolveRepo, Swarms: mgr, Logger: log, Version: o.Version,
		PrepareStart: configs.PrepareStart(cfg, loadOpts, local, log, warmRepo(pool, mgr, ws)),
		Inbox:        inbox,
		Land:         mgr.Land, // it says why in remote mode
		Pick:         mgr.Pick,
	}
}

// engineSettings checks the sandboxes' runtime against the engine and
// gives oc what the engine decides: the sandboxes' disk limit, and the
// metrics as its observer.
func engineSettings(ctx context.Context, cfg *configs.Config, be backend, oc *orchestrator.Config, met *metrics.Metrics, log *slog.Logger) error {
	if err := checkRuntime(ctx, cfg, be, oc.Net != nil, log); err != nil {
		return err
	}
	oc.DiskBytes = diskLimit(ctx, cfg, be, oc.Labels, log)
	oc.Observer = met
	return nil
}

// openInbox starts the inbox of permission requests when the policy asks a
// person and the containers have a channel to it: their ask sockets
// (sandboxes without a network, either git mode) or the local-mode git
// service. Else nil.
func openInbox(life context.Context, cfg *configs.Config, git *gitserve.Service, sbNet orchestrator.SandboxNet, mgr *orchestrator.Manager, secrets *redact.Redactor, log *slog.Logger) daemon.Inbox {
	sn, _ := sbNet.(*sandboxnet.Net)
	if sn != nil {
		// The egress proxy may ask a person (egress.ask, or a
		// repository's): the inbox is there for it whatever the policy.
		go sn.Follow(life, mgr.Subscribe(life))
	}
	if !sandboxnet.AsksAPerson(cfg) && sn == nil {
		return nil
	}
	if sandboxnet.AsksAPerson(cfg) && sn == nil && (git == nil || cfg.Git.Mode != configs.GitLocal) {
		log.Warn("agent.permission_policy asks a person, but containers of remote-mode swarms have no channel to the daemon (engine.backend swarm: no socket of their own): their asked tool calls are rejected")
	}
	if git == nil && sn == nil {
		return nil
	}
	icfg := inbox.Config{
		Timeout: cfg.Agent.AskTimeout, Fallback: cfg.Agent.AskFallback, Logger: log,
		Journal: mgr.JournalNote, Publish: mgr.Publish, Running: mgr.Running, Redact: secrets,
		Stories: mgr.StoriesRunning, RepoOf: mgr.RepoOf,
	}
	if sn != nil {
		icfg.Grant = sn.Grant
	}
	in := inbox.New(icfg)
	if sn != nil {
		sn.SetEgressAsker(in, mgr.StoriesRunning)
	}
	events := mgr.Subscribe(life)
	go in.Run(life, events)
	if git != nil && sandboxnet.AsksAPerson(cfg) {
		git.SetAsks(in)
	}
	if sn != nil && sandboxnet.AsksAPerson(cfg) {
		sn.SetAsks(in)
	}
	return in
}

// observe starts the notifier, attaches the metrics to mgr and serves them
// when metrics.listen is set.
func observe(life context.Context, cfg *configs.Config, met *metrics.Metrics, mgr *orchestrator.Manager, limits *notify.LimitNotices, secrets *redact.Redactor, log *slog.Logger) (stop func(), err error) {
	if err := startNotifier(life, cfg, mgr, limits, secrets, log); err != nil {
		return nil, err
	}
	met.Attach(mgr)
	if cfg.Metrics.Listen == "" {
		return func() {}, nil
	}
	return met.Serve(life, cfg.Metrics.Listen, cfg.Metrics.Pprof, log)
}

// startNotifier sends notices to notify.webhooks and notify.command, when
// any is set, until life ends.
func startNotifier(life context.Context, cfg *configs.Config, mgr *orchestrator.Manager, limits *notify.LimitNotices, secrets *redact.Redactor, log *slog.Logger) error {
	board := cfg.Notify.BoardURL
	n, err := notify.New(notify.Config{Webhooks: cfg.Notify.Webhooks, Command: cfg.Notify.Command,
		Board: func() string { return board }, Journal: mgr.JournalNote, Redact: secrets, Logger: log})
	if err != nil {
		return err
	}
	if !n.Enabled() {
		return nil
	}
	log.Info("notifications on", "webhooks", len(cfg.Notify.Webhooks), "command", len(cfg.Notify.Command) > 0)
	limits.Set(n, mgr.RepoOf)
	go n.Run(life, mgr.Subscribe(life))
	return nil
}

// loadConfig reads the configuration layers and logs what matters of them
// (values of agent.env are secrets: the Secrets type prints keys only).
func loadConfig(opts configs.LoadOptions, log *slog.Logger) (*configs.Config, error) {
	cfg, err := configs.Load(opts)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		log.Warn("config", "warning", w)
	}
	log.Info("config", "image", cfg.Sandbox.Image, "maxContainers", cfg.Swarm.MaxContainers,
		"cpus", cfg.Sandbox.CPUs, "memoryBytes", cfg.Sandbox.MemoryBytes, "memorySwapBytes", cfg.Sandbox.MemorySwapBytes,
		"pids", cfg.Sandbox.Pids, "runtime", cfg.Sandbox.Runtime, "timeout", cfg.Swarm.Timeout,
		"gitMode", cfg.Git.Mode, "agent", cfg.Agent.Kind, "agentEnv", cfg.Agent.Env)
	return cfg, nil
}

// defaultPaths fills the socket and data dir the flags left empty and
// makes the data dir.
func defaultPaths(o *Options) error {
	var err error
	if o.Socket == "" {
		o.Socket = daemon.DefaultSocketPath()
	}
	if o.DataDir == "" {
		if o.DataDir, err = daemon.DefaultDataDir(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w (pass --data-dir)", o.DataDir, err)
	}
	return nil
}

// openGit starts the local-mode git service (nil in remote mode). The probe
// reads a container's branch through the daemon's own engine client, so
// cleanup can tell what only the container holds.
func openGit(cfg *configs.Config, o Options, be backend, met *metrics.Metrics, log *slog.Logger) (*gitserve.Service, error) {
	nofile := raiseFileLimit(log)
	if cfg.Git.Mode == configs.GitRemote {
		return nil, nil
	}
	git, err := gitserve.New(gitserve.Options{
		DataDir: filepath.Join(o.DataDir, "git"), Logger: log,
		TipProbe: be.probe, Trees: be.trees, OnPush: met.GitPush,
		Limits: gitLimits(cfg, nofile, log),
	})
	if err != nil {
		return nil, fmt.Errorf("start the git service: %w (or set git.mode: remote)", err)
	}
	return git, nil
}

// openServices starts what the daemon serves sandboxes: the local-mode git
// service (nil in remote mode) and the model gateway (nil without model
// keys). closeAll stops both.
func openServices(cfg *configs.Config, o Options, be backend, met *metrics.Metrics, obs gateway.Observer, log *slog.Logger) (git *gitserve.Service, models orchestrator.ModelAccess, closeAll func(), err error) {
	git, err = openGit(cfg, o, be, met, log)
	if err != nil {
		return nil, nil, nil, err
	}
	gw, err := openModels(cfg, o.DataDir, obs, log)
	if err != nil {
		if git != nil {
			git.Close()
		}
		return nil, nil, nil, err
	}
	if gw != nil {
		// A nil *gateway.Service must stay a nil interface.
		models = modelAdapter{gw}
	}
	return git, models, func() {
		if gw != nil {
			gw.Close()
		}
		if git != nil {
			git.Close()
		}
	}, nil
}

// serveAPI answers on the socket until ctx ends or the server fails, then
// stops the server and the Manager cleanly.
func serveAPI(ctx context.Context, o Options, ln *daemon.Listener, mgr *orchestrator.Manager, so daemon.ServerOptions) error {
	srv := daemon.NewServer(so)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	so.Logger.Info("aimid ready", "socket", ln.Path(), "instance", o.Instance, "dataDir", o.DataDir, "pid", os.Getpid(), "version", o.Version)

	var serveErr error
	select {
	case <-ctx.Done():
		so.Logger.Info("aimid stopping: containers keep running and are recovered at the next start")
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, srv.Shutdown(sctx), mgr.Shutdown(sctx), ln.Close())
}

// takeInstance makes o.Instance this daemon's on the engine (see
// daemon/instancelock), or says which daemon holds it. release gives it
// back: the daemon's last step but the socket's.
func takeInstance(ctx context.Context, o Options, log *slog.Logger) (release func(), err error) {
	sock, err := filepath.Abs(o.Socket)
	if err != nil {
		return nil, err
	}
	data, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	lock, err := instancelock.Acquire(ctx, cli, instancelock.Self(o.Instance, sock, data), nil, log)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return func() {
		defer cli.Close()
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := lock.Release(rctx); err != nil {
			log.Warn("instance marker left behind; the next daemon of the instance removes it", "err", err)
		}
	}, nil
}

// sealSandboxes gives the sandboxes no network (package sandboxnet); their
// budget sockets answer with budgets (the keeper of openBudgets).
func sealSandboxes(cfg *configs.Config, dataDir string, git *gitserve.Service, models orchestrator.ModelAccess, budgets contract.Budgets, oc *orchestrator.Config, log *slog.Logger) (closeAll func(), err error) {
	var gw *gateway.Service
	if ma, ok := models.(modelAdapter); ok {
		gw = ma.Service
	}
	sn, err := sandboxnet.New(sandboxnet.Options{Config: cfg, DataDir: dataDir, Git: git, Models: gw, Budgets: budgets, Log: log})
	if err != nil || sn == nil {
		return func() {}, err
	}
	oc.Net = sn
	return sn.CloseAll, nil
}

// managerConfig is the Manager's configuration: the config's keys, the
// services, the instance's label and the engine's reader of containers.
func managerConfig(cfg *configs.Config, o Options, be backend, git *gitserve.Service, models orchestrator.ModelAccess, log *slog.Logger) orchestrator.Config {
	oc := orchestratorConfig(cfg, git, log)
	oc.Models = models
	oc.Labels = map[string]string{contract.LabelDaemon: o.Instance}
	oc.RadarDir = filepath.Join(o.DataDir, "radar")
	oc.OriginDir = filepath.Join(o.DataDir, "origin")
	if be.probe != nil && be.trees != nil {
		// Whatever the git mode, what only a container holds is read and
		// taken out of it before it is removed or replaced.
		oc.Work = gitserve.Keeper{Probe: be.probe, Trees: be.trees, Scratch: o.DataDir}
	}
	return oc
}
