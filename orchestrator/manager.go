package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/state"
	"github.com/google/uuid"
)

// Defaults of Config's zero values.
const (
	DefaultMaxContainers = 4
	DefaultTimeout       = 2 * time.Hour
	DefaultStopGrace     = 30 * time.Second
	DefaultStopWait      = 2 * time.Minute
	DefaultCleanupWait   = 2 * time.Minute
)

// Manager runs the swarms of every repository the daemon serves. Its methods
// are safe for concurrent use.
type Manager struct {
	cfg Config
	eng engine.Engine
	log *slog.Logger
	bus *bus

	// life is the supervisors' context: Shutdown cancels it after they were
	// told to leave their containers alone; the caller cancelling New's ctx
	// has the same effect without the flush (what a crash looks like).
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	swarms  map[string]*swarm        // by repo path
	repoMu  map[string]chan struct{} // one token per repo: serialises Start/Stop/Resume/Cleanup/adopt
	oomed   map[string]bool          // container ids the engine reported oom for
	closing bool

	beat heartbeat // the state-file watch's last round, for Health
	tops repoTops  // repositories' top levels git named, for cleanRepo
}

// New checks the config and returns a Manager. It makes no engine call;
// the daemon calls Recover next.
func New(ctx context.Context, cfg Config, eng engine.Engine) (*Manager, error) {
	if eng == nil {
		return nil, errors.New("orchestrator: no engine")
	}
	if cfg.MaxContainers < 0 {
		return nil, fmt.Errorf("%w: maxContainers %d is negative; use 1 or more (default %d)", api.ErrInvalidRequest, cfg.MaxContainers, DefaultMaxContainers)
	}
	if cfg.MaxContainers == 0 {
		cfg.MaxContainers = DefaultMaxContainers
	}
	if cfg.Timeout < 0 || cfg.StopGrace < 0 {
		return nil, fmt.Errorf("%w: timeout and stop grace must not be negative", api.ErrInvalidRequest)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = DefaultStopWait
	}
	if cfg.CleanupWait <= 0 {
		cfg.CleanupWait = DefaultCleanupWait
	}
	for k := range cfg.EnvVars {
		if !contract.ValidEnvKey(k) {
			return nil, fmt.Errorf("%w: task env var %q: keys must match %s", api.ErrInvalidRequest, k, contract.PatternEnvKey)
		}
	}
	for k := range cfg.RunnerEnv {
		// Looser than envVars keys: any POSIX-style name.
		if !contract.ValidEnvName(k) {
			return nil, fmt.Errorf("%w: runner env var %q: keys must match %s", api.ErrInvalidRequest, k, contract.PatternEnvName)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RadarDir == "" {
		cfg.RadarDir = filepath.Join(os.TempDir(), "aimi-radar")
	}
	if cfg.OriginDir == "" {
		cfg.OriginDir = filepath.Join(cfg.RadarDir, "origin")
	}
	cfg.EnvVars = maps.Clone(cfg.EnvVars)
	cfg.RunnerEnv = maps.Clone(cfg.RunnerEnv)
	life, cancel := context.WithCancel(ctx)
	m := &Manager{
		cfg: cfg, eng: eng, log: cfg.Logger, bus: newBus(),
		life: life, cancel: cancel,
		swarms: map[string]*swarm{}, repoMu: map[string]chan struct{}{}, oomed: map[string]bool{},
	}
	m.beat.beat()
	if cfg.Git != nil {
		cfg.Git.OnRefused(m.noteGitRefused)
		if src, ok := cfg.Git.(TipSource); ok {
			src.OnTip(m.noteTip)
		}
	}
	m.wg.Go(func() { m.watchForeignStops(life) })
	if src := engine.Capabilities(eng).Events; src != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.watchOOM(life, src)
		}()
	}
	return m, nil
}

// Subscribe streams every state change until ctx ends (or Shutdown). A
// subscriber that does not keep up loses events rather than stall swarms.
func (m *Manager) Subscribe(ctx context.Context) <-chan api.Event { return m.bus.subscribe(ctx) }

func (m *Manager) publish(e api.Event) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.Event(e)
	}
	m.bus.publish(e)
}

// lockRepo serialises the operations that change one repository's swarm.
func (m *Manager) lockRepo(repo string) func() {
	unlock, _ := m.lockRepoCtx(context.Background(), repo)
	return unlock
}

// lockRepoCtx is lockRepo that gives up when ctx ends (a bounded command
// must not wait without end behind another one holding the repository).
func (m *Manager) lockRepoCtx(ctx context.Context, repo string) (func(), error) {
	m.mu.Lock()
	l, ok := m.repoMu[repo]
	if !ok {
		l = make(chan struct{}, 1)
		m.repoMu[repo] = l
	}
	m.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the other command on this repository to finish: %w", ctx.Err())
	}
}

func (m *Manager) getSwarm(repo string) *swarm {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.swarms[repo]
}

func (m *Manager) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing || m.life.Err() != nil {
		return api.ErrShutdown
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Start validates the request's task files, creates every container (state
// entries pending with real ids) and lets at most Max run at a time.
func (m *Manager) Start(ctx context.Context, req api.StartRequest) (api.SwarmView, error) {
	repo, err := m.checkStart(req)
	if err != nil {
		return api.SwarmView{}, err
	}
	unlock := m.lockRepo(repo)
	defer unlock()
	var hold *swarm // the started swarm: the pool waits for its work
	defer m.poolBusy()(&hold)
	tr := newTracer(m.log, "start phase", "phase", "repo", repo)
	cur, appended, err := m.current(ctx, repo, req)
	if err != nil || appended != nil {
		return viewOf(appended), err
	}
	tr.mark("adopted")
	// The swarm's network and the git service's copy of the repository
	// are made while the task files are read; a refused start removes
	// them again.
	sw := &swarm{m: m, id: uuid.NewString(), repo: repo, repoID: RepoID(repo), local: req.Local, store: state.Open(repo)}
	sw.network = networkName(sw.id)
	setup := sw.beginSetup(ctx)
	refuse := func(err error) (api.SwarmView, error) {
		setup.undo(ctx)
		return api.SwarmView{}, err
	}
	named, err := sw.plan(ctx, req, tr)
	if err != nil {
		return refuse(err)
	}
	if cur != nil {
		// The finished (or just stopped) swarm is replaced: its journals
		// stay on disk, its containers until cleanup or name reuse.
		cur.close(ctx)
		m.mu.Lock()
		delete(m.swarms, repo)
		m.mu.Unlock()
	}
	now := time.Now().UTC()
	if err := sw.openLedger(ctx, &state.Swarm{SwarmID: sw.id, CreatedAt: now, UpdatedAt: now}, true); err != nil {
		return refuse(err)
	}
	tr.mark("state opened")
	if err := setup.wait(); err != nil {
		sw.discard(ctx, nil, setup)
		return api.SwarmView{}, err
	}
	tr.mark("network ready, names planned")
	created, err := sw.createAll(ctx, named)
	tr.mark("all created")
	if err != nil {
		sw.discard(ctx, created, setup)
		return api.SwarmView{}, err
	}
	sw.saveAttempts(ctx)
	m.mu.Lock()
	m.swarms[repo] = sw
	m.mu.Unlock()
	hold = sw
	if ws := m.workspaces(sw.local); ws != nil {
		// Once its containers work: the build's copy and commit would
		// take the engine and the cores from them.
		sw.afterWork(func() { ws.Refresh(repo, sw.baseImage, sw.id) })
	}
	if cur != nil {
		// Name reuse removed the replaced swarm's containers of the same
		// task files; its network goes too once nothing uses it, so
		// swarms started one after another do not use up the engine's
		// address pools.
		if err := m.eng.RemoveNetworkIfUnused(ctx, cur.network); err != nil {
			m.log.Debug("replaced swarm's network stays", "network", cur.network, "err", err)
		}
	}
	m.publish(api.Event{SwarmID: sw.id, RepoPath: repo, Kind: api.EventSwarmStarted})
	return sw.view(), nil
}

// viewOf is the view an append returned, or none.
func viewOf(v *api.SwarmView) api.SwarmView {
	if v == nil {
		return api.SwarmView{}
	}
	return *v
}

// checkStart refuses a request that cannot start whatever the repository
// holds, and returns its clean repository path.
func (m *Manager) checkStart(req api.StartRequest) (string, error) {
	if err := m.checkOpen(); err != nil {
		return "", err
	}
	repo, err := m.cleanRepo(req.RepoPath)
	if err != nil {
		return "", err
	}
	if err := req.Check(); err != nil {
		return "", err
	}
	if req.Local && m.cfg.Git == nil {
		return "", fmt.Errorf("%w: local mode needs the git service, which this daemon has not configured (git.mode)", api.ErrInvalidRequest)
	}
	return repo, nil
}

// current is the repository's swarm a start replaces (nil: none). An
// active one is appended to (the view is returned), stopped first (force)
// or refused. The caller holds the repo lock.
func (m *Manager) current(ctx context.Context, repo string, req api.StartRequest) (*swarm, *api.SwarmView, error) {
	cur, err := m.adopt(ctx, repo)
	if err != nil && !errors.Is(err, api.ErrNoSwarm) {
		return nil, nil, err
	}
	if cur != nil && (cur.active() || cur.foreignActive(ctx)) {
		switch {
		case req.Append:
			v, err := cur.append(ctx, req)
			if err != nil {
				return nil, nil, err
			}
			return nil, &v, nil
		case req.Force:
			if err := cur.stop(ctx, nil); err != nil {
				return nil, nil, fmt.Errorf("stop the active swarm before replacing it: %w", err)
			}
		default:
			return nil, nil, api.ErrActiveSwarm
		}
	}
	return cur, nil, nil
}

// plan validates the task files and the requests their containers will
// get, settles the swarm's max, image and origin, and names its
// containers (exited ones whose names it reuses give up their work first;
// while one cannot, the earlier swarm stays as it is).
func (sw *swarm) plan(ctx context.Context, req api.StartRequest, tr *tracer) ([]*ctr, error) {
	m := sw.m
	planned, err := validateTasks(ctx, sw.repo, req.TaskFiles, nil, req.Local)
	if err != nil {
		return nil, err
	}
	tr.mark("task files validated")
	repoURL := ""
	if !req.Local {
		if repoURL, err = originURL(ctx, sw.repo); err != nil {
			return nil, err
		}
	}
	if err := probeRequests(planned, repoURL, m.cfg.EnvVars); err != nil {
		return nil, err
	}
	max := cmp.Or(req.Max, m.cfg.MaxContainers)
	image := cmp.Or(req.Image, m.cfg.Image)
	if image == "" {
		return nil, fmt.Errorf("%w: no image: set sandbox.image in the config or pass --image", api.ErrInvalidRequest)
	}
	sw.repoURL = repoURL // planNames gives it to each container
	sw.setAttempts(req)
	named, err := sw.nameAndTake(ctx, planned, req.TaskFiles, nil)
	if err != nil {
		return nil, err
	}
	sw.baseImage = image
	if ws := m.workspaces(req.Local); ws != nil {
		if img, commit, ok := ws.Image(ctx, sw.repo, image); ok {
			image, sw.wsBase = img, commit
			tr.mark("workspace image found")
		}
	}
	sw.max, sw.image, sw.slots = max, image, newLimiter(max)
	return named, nil
}

// probeRequests validates the task-request each planned container will get
// (with stand-in ids; in local mode a stand-in URL), so a request the
// runner would refuse fails Start before anything is created.
func probeRequests(planned []plannedTask, repoURL string, env map[string]string) error {
	if repoURL == "" {
		repoURL = "https://git.invalid/local.git"
	}
	var probs []api.TaskFileProblem
	for _, p := range planned {
		m := acpmsg.NewMessage(acpmsg.TypeTaskRequest, "00000000-0000-4000-8000-000000000000", "000000000000", &acpmsg.TaskRequest{
			TaskFilePath: p.path, BranchName: p.tf.Metadata.BranchName, RepoURL: repoURL, EnvVars: envVars(env)})
		if err := m.Validate(); err != nil {
			probs = append(probs, api.TaskFileProblem{Path: p.path, Reason: "its task-request would be invalid: " + oneLine(err.Error())})
		}
	}
	if len(probs) > 0 {
		return &api.TaskFileError{Problems: probs}
	}
	return nil
}

// originURL is the repository's origin, as the task-request's repoUrl. An
// scp-style address (git@host:org/repo.git) becomes ssh://git@host/org/repo.git
// because the message spec wants a URL.
func originURL(ctx context.Context, repo string) (string, error) {
	out, err := gitcmd.Git{}.Run(ctx, repo, "remote", "get-url", "origin")
	if err != nil {
		return "", fmt.Errorf("%w: read the repository's origin remote: %v (add one with 'git remote add origin URL', or start with --local)", api.ErrInvalidRequest, err)
	}
	u := strings.TrimSpace(out)
	if !strings.Contains(u, "://") {
		if at := strings.Index(u, ":"); at > 0 && !strings.HasPrefix(u, "/") {
			u = "ssh://" + u[:at] + "/" + strings.TrimPrefix(u[at+1:], "/")
		}
	}
	if !acpmsg.ValidRepoURL(u) {
		return "", fmt.Errorf("%w: origin %q is not an https or ssh URL the container can clone; use --local for a local repository", api.ErrInvalidRequest, u)
	}
	// A password or token in the URL would travel into the task-request,
	// the journal and the container's labels: drop it (credentials go in by
	// the runner's environment).
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		if _, has := pu.User.Password(); has {
			pu.User = url.User(pu.User.Username())
			u = pu.String()
		}
	}
	return u, nil
}

// lockedSwarm takes the repo lock of repoPath and returns its swarm,
// adopted from the state file and the engine if the Manager does not hold
// it yet. The caller runs unlock when done (on error the lock is already
// released).
func (m *Manager) lockedSwarm(ctx context.Context, repoPath string) (sw *swarm, unlock func(), err error) {
	repo, err := m.cleanRepo(repoPath)
	if err != nil {
		return nil, nil, err
	}
	if unlock, err = m.lockRepoCtx(ctx, repo); err != nil {
		return nil, nil, err
	}
	sw, err = m.adopt(ctx, repo)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return sw, unlock, nil
}

// Status reconciles the repo's swarm with the engine and returns it.
func (m *Manager) Status(ctx context.Context, repoPath string) (api.SwarmView, error) {
	repo, err := m.cleanRepo(repoPath)
	if err != nil {
		return api.SwarmView{}, err
	}
	// A swarm in memory needs no repo lock: status must answer while a
	// Stop waits out its grace period under that lock.
	if sw := m.getSwarm(repo); sw != nil {
		sw.reconcileLive(ctx)
		return sw.view(), nil
	}
	sw, unlock, err := m.lockedSwarm(ctx, repo)
	if err != nil {
		return api.SwarmView{}, err
	}
	defer unlock()
	sw.reconcileLive(ctx)
	return sw.view(), nil
}

// Stop stops the named containers of the repo's swarm (all when names is
// empty): SIGTERM, grace, kill; they end stopped unless their final message
// said otherwise first. It returns when they are terminal or ctx ends.
func (m *Manager) Stop(ctx context.Context, repoPath string, names []string) (api.SwarmView, error) {
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.SwarmView{}, err
	}
	defer unlock()
	if err := sw.stop(ctx, names); err != nil {
		return sw.view(), err
	}
	return sw.view(), nil
}

// Resume reconciles, starts the pending containers that have no supervisor,
// and with retryFailed recreates and reruns the failed ones.
func (m *Manager) Resume(ctx context.Context, repoPath string, retryFailed bool) (api.SwarmView, error) {
	if err := m.checkOpen(); err != nil {
		return api.SwarmView{}, err
	}
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.SwarmView{}, err
	}
	defer unlock()
	sw.reconcileLive(ctx)
	if err := sw.resume(ctx, retryFailed); err != nil {
		return sw.view(), err
	}
	return sw.view(), nil
}

// Shutdown is the daemon's SIGTERM: supervisors let go of their containers
// (which keep running), journals and state are flushed, subscriptions end.
// Recover in the next daemon picks everything up again.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closing = true
	sws := slices.Collect(maps.Values(m.swarms))
	m.mu.Unlock()
	m.cancel()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("shutdown: supervisors did not finish: %w", ctx.Err())
	}
	var errs []error
	for _, sw := range sws {
		if err := sw.closeLedger(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.bus.closeAll()
	return errors.Join(errs...)
}

// journalPoll is how often a followed journal is checked for growth: the
// writer is another goroutine, and a poll keeps this independent of the
// Recorder's internals.
const journalPoll = 200 * time.Millisecond
