package container

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// Docker drives one Docker engine through the Engine API. It is safe for
// concurrent use.
type Docker struct {
	cli  *client.Client
	log  *slog.Logger
	wrap func(http.RoundTripper) http.RoundTripper // WithTransport
	// netMu serialises EnsureNetwork: the engine's duplicate-name check for
	// networks is racy.
	netMu sync.Mutex
	// seen is when each network was last seen to exist (networkSeenFor).
	seenMu sync.Mutex
	seen   map[string]time.Time
	// owner are labels every network this Docker uses or removes must
	// carry besides the sandbox marker (WithOwner).
	owner map[string]string
	// logMaxSize is WithLogMaxSize's size, "" for the default.
	logMaxSize string
	// exits reports the exits Wait asks for from one event stream.
	exits *exitWatch
	// sealedHosts is WithSealedHosts's file, "" for none; defaultRuntime
	// is the engine's default runtime when there is one (prepareSealed).
	sealedHosts, defaultRuntime string
}

// networkSeenFor is how long a network seen to exist is taken to exist
// without asking again: the engine creates a container on a network that
// does not exist and only its start fails, so creates check first, and a
// fan-out's creates on one network need the answer once.
const networkSeenFor = 5 * time.Second

// checkNetwork returns ErrNetworkNotFound when the engine has no network
// name (asking at most once per networkSeenFor while it exists).
func (d *Docker) checkNetwork(ctx context.Context, name string) error {
	d.seenMu.Lock()
	at, ok := d.seen[name]
	d.seenMu.Unlock()
	if ok && time.Since(at) < networkSeenFor {
		return nil
	}
	if _, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{}); errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s (create it with EnsureNetwork first)", engine.ErrNetworkNotFound, name)
	} else if err != nil {
		return fmt.Errorf("inspect network %s: %w", name, err)
	}
	d.seenMu.Lock()
	defer d.seenMu.Unlock()
	if d.seen == nil || len(d.seen) > 1024 {
		d.seen = map[string]time.Time{}
	}
	d.seen[name] = time.Now()
	return nil
}

// Option configures a Docker.
type Option func(*Docker)

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(d *Docker) { d.log = l } }

// WithLogMaxSize sets the size at which the engine rotates the log of the
// containers this Docker creates (json-file max-size, e.g. "32m"); "" is
// the default (logMaxSize). The engine keeps a few such files, so it
// bounds the output that can wait unread while no follow reader holds a
// container back (see Lines).
func WithLogMaxSize(size string) Option { return func(d *Docker) { d.logMaxSize = size } }

// NewDocker connects to the engine named by the environment (DOCKER_HOST,
// DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) with API version
// negotiation, since the engine may speak an older API than the client
// library, and pings it.
func NewDocker(ctx context.Context, opts ...Option) (*Docker, error) {
	d := newDocker(nil, opts...)
	cli, wrapped, err := NewClient(d.wrap)
	if err == nil && d.wrap != nil && !wrapped {
		d.log.Warn("engine requests are not counted: the engine endpoint is not a unix socket or plain TCP")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: configure client from the environment: %w (check DOCKER_HOST)", engine.ErrEngineUnavailable, err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w at %s: %w (is the Docker daemon running, and may this user use its socket?)", engine.ErrEngineUnavailable, cli.DaemonHost(), err)
	}
	// Negotiate now, once: left to the first requests, the client library
	// negotiates lazily and unsynchronised, a data race when supervisors make
	// their first calls at the same time (go test -race saw it).
	cli.NegotiateAPIVersion(ctx)
	d.cli = cli
	if err := d.prepareSealed(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return d, nil
}

func newDocker(cli *client.Client, opts ...Option) *Docker {
	d := &Docker{cli: cli, log: slog.Default()}
	d.exits = newExitWatch(d)
	for _, o := range opts {
		o(d)
	}
	return d
}

// Close ends the exit event stream (waiters get ErrEngineUnavailable) and
// releases the client's connections.
func (d *Docker) Close() error {
	d.exits.close()
	return d.cli.Close()
}

// HasRuntime reports whether the engine has the named OCI runtime (e.g.
// "sysbox-runc"), so callers can use it "when available".
func (d *Docker) HasRuntime(ctx context.Context, name string) (bool, error) {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("read engine info: %w", err)
	}
	_, ok := info.Runtimes[name]
	return ok, nil
}

// ImageExists reports whether ref is present on the engine.
func (d *Docker) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := d.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case errdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
}

// Create creates (does not start) the container described by s and returns
// its id. The spec is validated completely before any engine call. A
// container that already has the name is a conflict (ErrConflict) while it
// runs, and is removed and replaced otherwise. A missing image is
// ErrImageNotFound, a missing required runtime ErrRuntimeMissing, a missing
// network ErrNetworkNotFound; none of them leaves anything behind.
func (d *Docker) Create(ctx context.Context, s engine.Spec) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	runtime := s.Runtime
	if runtime != "" {
		ok, err := d.HasRuntime(ctx, runtime)
		if err != nil {
			return "", fmt.Errorf("create container %s: %w", s.Name, err)
		}
		if !ok && s.RequireRuntime {
			return "", fmt.Errorf("create container %s: %w: runtime %q is required by the configuration but the engine does not have it; install it (%s) or drop the requirement", s.Name, engine.ErrRuntimeMissing, runtime, installGuide(runtime))
		}
		if !ok {
			d.log.Warn("runtime not installed, using the engine default", "container", s.Name, "runtime", runtime, "install", installGuide(runtime))
			runtime = ""
		}
	}
	// The create is asked for straight away; the image and a stale holder
	// of the name are looked at only when it is refused, the network once
	// per networkSeenFor. Each look is a round trip to an engine that,
	// during a fan-out, is busy starting other containers: three of them
	// before every create made each create, and so each start, later.
	if s.Network != "" && s.Network != engine.NetworkNone {
		if err := d.checkNetwork(ctx, s.Network); err != nil {
			return "", fmt.Errorf("create container %s: %w", s.Name, err)
		}
	}
	cfg, hc, nc := engineConfig(&s, runtime, d.logMaxSize)
	d.sealOff(&s, runtime, cfg, hc)
	resp, err := d.cli.ContainerCreate(ctx, cfg, hc, nc, nil, s.Name)
	if errdefs.IsConflict(err) {
		if err := d.replaceStale(ctx, s.Name, s.Labels); err != nil {
			return "", err
		}
		resp, err = d.cli.ContainerCreate(ctx, cfg, hc, nc, nil, s.Name)
	}
	if s.DiskBytes > 0 && storageOptRefused(err) {
		return "", fmt.Errorf("create container %s: %w: %w (unset sandbox.disk)", s.Name, engine.ErrDiskLimitUnsupported, err)
	}
	if errdefs.IsConflict(err) {
		// Another creator won the race for the name after replaceStale.
		return "", fmt.Errorf("create container %s: %w: %w", s.Name, engine.ErrConflict, err)
	}
	if errdefs.IsNotFound(err) {
		if why := d.missing(ctx, s); why != nil {
			return "", why
		}
	}
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", s.Name, err)
	}
	for _, w := range resp.Warnings {
		d.log.Warn("engine warning on create", "container", s.Name, "warning", w)
	}
	return resp.ID, nil
}

// missing says the engine lacks the spec's image, after it refused a
// create as not found; nil when the image is there.
func (d *Docker) missing(ctx context.Context, s engine.Spec) error {
	if ok, err := d.ImageExists(ctx, s.Image); err != nil {
		return fmt.Errorf("create container %s: %w", s.Name, err)
	} else if !ok {
		return fmt.Errorf("create container %s: %w: %s (%s; nothing is pulled)", s.Name, engine.ErrImageNotFound, s.Image, imageBuildHint)
	}
	return nil
}

// replaceStale makes the name free for a container labelled labels: a
// holder of another owner (daemon instance, repository: sameOwner), or a
// running (paused, restarting, being removed) one, is a conflict; a
// created or exited one of the same owner is removed.
func (d *Docker) replaceStale(ctx context.Context, name string, labels map[string]string) error {
	old, err := d.cli.ContainerInspect(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create container %s: inspect existing container: %w", name, err)
	}
	// Only a container of the same repository is stale: one of another
	// repository (whose swarm may have created it a moment ago) or anyone
	// else's is never removed to make room.
	if old.Config == nil {
		return fmt.Errorf("create container %s: %w: the name belongs to a container of another tool (id %.12s); pick another name", name, engine.ErrConflict, old.ID)
	}
	if err := sameOwner(old.Config.Labels, labels); err != nil {
		return fmt.Errorf("create container %s: %w: the name belongs to a container of another repository, daemon or tool (id %.12s: %v); pick another name", name, engine.ErrConflict, old.ID, err)
	}
	if st := old.State; st != nil && (st.Running || st.Paused || st.Restarting || st.Status == "removing") {
		return fmt.Errorf("create container %s: %w (status %s, id %.12s); stop it first or pick another name", name, engine.ErrConflict, st.Status, old.ID)
	}
	d.log.Info("removing stale container before recreating it", "container", name, "id", old.ID)
	if err := d.Remove(ctx, old.ID); err != nil {
		return fmt.Errorf("create container %s: remove stale container: %w", name, err)
	}
	return nil
}

// engineConfig translates a validated Spec into the engine's create request.
func engineConfig(s *engine.Spec, runtime, logSize string) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	labels := make(map[string]string, len(s.Labels)+1)
	for k, v := range s.Labels {
		labels[k] = v
	}
	if _, ok := labels[contract.LabelSandbox]; !ok {
		labels[contract.LabelSandbox] = "true"
	}
	cfg := &container.Config{
		Image:      s.Image,
		Labels:     labels,
		Env:        append([]string(nil), s.Env...),
		User:       s.User,
		WorkingDir: s.WorkingDir,
		Cmd:        append([]string(nil), s.Cmd...),
		// stdin stays open across attaches: the task-request is written
		// through a later attach, and closing that attach must not close
		// the runner's stdin. No TTY: it would merge stderr into stdout and
		// rewrite newlines.
		OpenStdin: true,
		StdinOnce: false,
		Tty:       false,
	}
	if len(cfg.Cmd) == 0 {
		cfg.Cmd = nil
	}
	for _, p := range s.Scratch {
		if cfg.Volumes == nil {
			cfg.Volumes = map[string]struct{}{}
		}
		cfg.Volumes[p] = struct{}{}
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Network),
		ReadonlyRootfs: s.ReadOnlyRootfs,
		Runtime:        runtime,
		ExtraHosts:     append([]string(nil), s.ExtraHosts...),
		CapDrop:        []string{"ALL"},
		CapAdd:         engine.KeptCapabilities(),
		SecurityOpt:    []string{noNewPrivileges},
		LogConfig: container.LogConfig{
			Type:   logDriver,
			Config: map[string]string{"max-size": cmp.Or(logSize, logMaxSize), "max-file": logMaxFile},
		},
		// No AutoRemove: the exit code and OOMKilled must survive until the
		// orchestrator has read them, even across its own restart.
		AutoRemove:    false,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Resources: container.Resources{
			NanoCPUs:   s.NanoCPUs,
			Memory:     s.MemoryBytes,
			MemorySwap: s.MemorySwapBytes,
		},
	}
	if s.PidsLimit != 0 {
		p := s.PidsLimit
		hc.Resources.PidsLimit = &p
	}
	if s.DiskBytes > 0 {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(s.DiskBytes, 10)}
	}
	if s.ReadOnlyRootfs {
		// Git, agents and most tools need a scratch directory.
		hc.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,size=256m"}
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	var nc *network.NetworkingConfig
	if s.Network != "" && s.Network != engine.NetworkNone {
		nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.Network: {}}}
	}
	return cfg, hc, nc
}

// Start starts a created container.
func (d *Docker) Start(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", id, notFound(err))
	}
	return nil
}

// wait follows one ContainerWait (exitWatch.alone): if it breaks (the
// engine restarted, the connection dropped), the container is inspected:
// an exited container's result comes from the inspection, a running one is
// waited on again.
func (d *Docker) wait(ctx context.Context, id string, resC <-chan container.WaitResponse, errC <-chan error) engine.Exit {
	backoff := 100 * time.Millisecond
	for {
		var werr error
		select {
		case res := <-resC:
			if res.Error != nil && res.Error.Message != "" {
				werr = errors.New(res.Error.Message)
				break
			}
			return d.exitFromInspect(ctx, id, int(res.StatusCode), true)
		case werr = <-errC:
		}
		if ctx.Err() != nil {
			return engine.Exit{Err: fmt.Errorf("wait for container %s: %w", id, ctx.Err())}
		}
		d.log.Warn("wait for container broke, inspecting and waiting again", "container", id, "err", werr)
		info, err := d.Inspect(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			return engine.Exit{Err: fmt.Errorf("wait for container %s: %w (removed while waiting)", id, engine.ErrNotFound)}
		}
		if err == nil && !info.Running && (info.Status == "exited" || info.Status == "dead") {
			return engine.Exit{Code: info.ExitCode, OOMKilled: info.OOMKilled}
		}
		if err := ctxutil.Sleep(ctx, backoff); err != nil {
			return engine.Exit{Err: fmt.Errorf("wait for container %s: %w", id, err)}
		}
		backoff = min(2*backoff, 5*time.Second)
		cond := container.WaitConditionNextExit
		if err == nil && info.Running {
			// not-running also returns at once if it exits before the
			// wait registers.
			cond = container.WaitConditionNotRunning
		}
		resC, errC = d.cli.ContainerWait(ctx, id, cond)
	}
}

// exitFromInspect adds OOMKilled, which neither a wait response nor a die
// event carries, and the exit code when known is false.
func (d *Docker) exitFromInspect(ctx context.Context, id string, code int, known bool) engine.Exit {
	ex := engine.Exit{Code: code}
	info, err := d.Inspect(ctx, id)
	if err != nil {
		d.log.Warn("inspect after exit failed; OOMKilled unknown", "container", id, "err", err)
		return ex
	}
	ex.OOMKilled = info.OOMKilled
	if !known {
		ex.Code = info.ExitCode
	}
	return ex
}

// Inspect reports a container's state and configuration.
func (d *Docker) Inspect(ctx context.Context, id string) (engine.Info, error) {
	ctx, cancel := callCtx(ctx)
	defer cancel()
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return engine.Info{}, fmt.Errorf("inspect container %s: %w", id, notFound(err))
	}
	info := engine.Info{ID: c.ID, Name: trimSlash(c.Name), Image: c.Image, ImageID: c.Image}
	if c.Config != nil {
		info.Image = c.Config.Image
		info.Labels = c.Config.Labels
		info.User = c.Config.User
	}
	if st := c.State; st != nil {
		info.Status = string(st.Status)
		info.Running = st.Running
		info.ExitCode = st.ExitCode
		info.OOMKilled = st.OOMKilled
		info.Error = st.Error
		info.Pid = st.Pid
		info.StartedAt = parseStateTime(st.StartedAt)
		info.FinishedAt = parseStateTime(st.FinishedAt)
	}
	if hc := c.HostConfig; hc != nil {
		info.NanoCPUs = hc.NanoCPUs
		info.MemoryBytes = hc.Memory
		info.MemorySwapBytes = hc.MemorySwap
		if hc.PidsLimit != nil {
			info.PidsLimit = *hc.PidsLimit
		}
		info.ReadOnlyRootfs = hc.ReadonlyRootfs
		info.Runtime = hc.Runtime
		info.SecurityOpt = hc.SecurityOpt
		info.CapAdd = capNames(hc.CapAdd)
		info.CapDrop = capNames(hc.CapDrop)
		info.LogDriver = hc.LogConfig.Type
		info.NetworkMode = string(hc.NetworkMode)
	}
	if c.NetworkSettings != nil {
		info.Networks = make(map[string]string, len(c.NetworkSettings.Networks))
		for name, ep := range c.NetworkSettings.Networks {
			if ep != nil {
				info.Networks[name] = ep.IPAddress
			}
		}
	}
	return info, nil
}

// Stop sends SIGTERM, waits up to grace (rounded up to whole seconds, the
// engine's unit), then kills. Stopping a container that is not running is
// not an error.
func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int(math.Ceil(max(grace, 0).Seconds()))
	// The engine answers after the grace and the kill.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+engineCallTimeout)
	defer cancel()
	if err := d.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil {
		return fmt.Errorf("stop container %s: %w", id, notFound(err))
	}
	return nil
}

// Remove force-removes a container (killing it if it runs) with its
// anonymous volumes. A container that does not exist is not an error.
func (d *Docker) Remove(ctx context.Context, id string) error {
	ctx, cancel := callCtx(ctx)
	defer cancel()
	err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || errdefs.IsNotFound(err) {
		return nil
	}
	if !errdefs.IsConflict(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	// "removal already in progress": wait until the other remover is done,
	// so that on return the name is free.
	for {
		if _, ierr := d.cli.ContainerInspect(ctx, id); errdefs.IsNotFound(ierr) {
			return nil
		}
		if serr := ctxutil.Sleep(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("remove container %s: %w (%w)", id, err, serr)
		}
	}
}

// List reports every container (any state) carrying all the given labels.
func (d *Docker) List(ctx context.Context, labels map[string]string) ([]engine.Info, error) {
	lctx, cancel := callCtx(ctx)
	cs, err := d.cli.ContainerList(lctx, container.ListOptions{All: true, Filters: labelFilters(labels)})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]engine.Info, 0, len(cs))
	for _, c := range cs {
		info, err := d.Inspect(ctx, c.ID)
		if errors.Is(err, engine.ErrNotFound) {
			continue // removed between list and inspect
		}
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		out = append(out, info)
	}
	return out, nil
}

func labelFilters(labels map[string]string) filters.Args {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	return f
}

// capNames strips the "CAP_" prefix the engine reports capabilities with, so
// they compare with what was asked for.
func capNames(caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		out = append(out, strings.TrimPrefix(c, "CAP_"))
	}
	return out
}

// notFound adds ErrNotFound to the engine's not-found errors so callers need
// not import errdefs.
func notFound(err error) error {
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %w", engine.ErrNotFound, err)
	}
	return err
}

func trimSlash(name string) string {
	if len(name) > 0 && name[0] == '/' {
		return name[1:]
	}
	return name
}

// parseStateTime parses the engine's RFC 3339 state times; its "never" value
// (0001-01-01T00:00:00Z) becomes the zero time.
func parseStateTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

var (
	_ engine.Engine      = (*Docker)(nil)
	_ engine.EventSource = (*Docker)(nil)
)
