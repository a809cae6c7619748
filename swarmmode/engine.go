package swarmmode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
)

const (
	objSpec    = "spec"
	objRequest = "request"
	objEnv     = "env"
	objFile    = "file"
	// requestPath is where the task-request config is mounted.
	requestPath = "/run/aimi/task-request.json"
	// maxFileBytes bounds a read-only file turned into a config (Swarm's
	// own limit is 500 KiB; a CA certificate is a few KiB).
	maxFileBytes = 256 << 10
	// logMaxSize and logMaxFile bound a task's json-file log on its node,
	// as the single engine does.
	logMaxSize = "32m"
	logMaxFile = "4"
)

// serviceNameRE is what Swarm accepts as a service name (a DNS label).
var serviceNameRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[-_]*[A-Za-z0-9]+)*$`)

// Options configure an Engine.
type Options struct {
	// HostAddr is the address tasks reach the daemon's machine at (the
	// git service in local mode); EnsureNetwork reports it as the gateway.
	HostAddr string
	// StopGrace is the grace a task gets between SIGTERM and SIGKILL when
	// stopped; fixed when the service is created. Default 10 s.
	StopGrace time.Duration
	// Poll is how often task states are read; default 500 ms.
	Poll time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Engine runs sandboxes as Swarm mode services through a manager's API. It
// is safe for concurrent use.
type Engine struct {
	cli  client.APIClient
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	nodes map[string]string // node id -> hostname
	memos map[string]*memo  // service name -> its own task as last seen
}

// New checks that cli talks to a manager of an active swarm and returns an
// Engine on it. The error says what to fix.
func New(ctx context.Context, cli client.APIClient, opts Options) (*Engine, error) {
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (check engine.host or DOCKER_HOST)", container.ErrEngineUnavailable, err)
	}
	if info.Swarm.LocalNodeState != swarm.LocalNodeStateActive {
		return nil, fmt.Errorf("the engine at %s is not part of a swarm (state %q): point engine.host at a Swarm mode manager, run 'docker swarm init' there, or set engine.backend to docker", cli.DaemonHost(), info.Swarm.LocalNodeState)
	}
	if !info.Swarm.ControlAvailable {
		return nil, fmt.Errorf("the engine at %s is a swarm worker: point engine.host at a manager node (docker node ls there shows the managers)", cli.DaemonHost())
	}
	return &Engine{cli: cli, opts: opts, log: opts.Logger, nodes: map[string]string{}, memos: map[string]*memo{}}, nil
}

// ServiceName is the service a container name maps to: the name itself when
// Swarm accepts it, otherwise a shortened form with a hash of the name.
// Applied to its own result it changes nothing, so ids handed out by Create
// can be passed back in.
func ServiceName(name string) string {
	if len(name) <= 63 && serviceNameRE.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if len(clean) > 46 {
		clean = clean[:46]
	}
	clean = strings.Trim(clean, "-")
	return clean + "-" + hex.EncodeToString(sum[:])[:16]
}

// idRE is the shape of a sandbox id: the state file's containerId pattern
// (12 to 64 lowercase hex digits) holds it.
var idRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// SandboxID is the id of the sandbox whose service is svc: a hash of the
// service name, so it is known before the service exists and has the
// shape of a container id, which the state file requires.
func SandboxID(svc string) string {
	sum := sha256.Sum256([]byte(svc))
	return hex.EncodeToString(sum[:])
}

// serviceOf resolves a sandbox id (from Create) or a container name to its
// service name. An id whose spec is gone is container.ErrNotFound.
func (e *Engine) serviceOf(ctx context.Context, ref string) (string, error) {
	if !idRE.MatchString(ref) {
		return ServiceName(ref), nil
	}
	cfg, _, err := e.cli.ConfigInspectWithRaw(ctx, "aimi-"+ref[:20]+"-"+objSpec)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("sandbox %.12s: %w", ref, container.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read the spec of sandbox %.12s: %w", ref, err)
	}
	var st storedSpec
	if err := json.Unmarshal(cfg.Spec.Data, &st); err != nil {
		return "", fmt.Errorf("read the spec of sandbox %.12s: %w", ref, err)
	}
	return ServiceName(st.Name), nil
}

// objName names a sandbox's config, secret or network: Swarm object names
// are at most 64 characters, container names up to 128.
func objName(service, kind string) string {
	sum := sha256.Sum256([]byte(service))
	return "aimi-" + hex.EncodeToString(sum[:])[:20] + "-" + kind
}

// storedSpec is a sandbox's spec as kept in its spec config until the
// service is created: everything but the environment's values, which are
// secrets.
type storedSpec struct {
	Name    string            `json:"name"`
	Image   string            `json:"image"`
	Labels  map[string]string `json:"labels"`
	EnvKeys []string          `json:"envKeys"` // secret i holds EnvKeys[i]'s value
	Files   []storedFile      `json:"files"`

	NanoCPUs       int64    `json:"nanoCpus"`
	MemoryBytes    int64    `json:"memoryBytes"`
	PidsLimit      int64    `json:"pidsLimit"`
	ReadOnlyRootfs bool     `json:"readOnlyRootfs"`
	Scratch        []string `json:"scratch"`
	ExtraHosts     []string `json:"extraHosts"`
	User           string   `json:"user"`
	WorkingDir     string   `json:"workingDir"`
	Cmd            []string `json:"cmd"`
	Created        string   `json:"created"`
}

type storedFile struct {
	Config string `json:"config"` // config name
	Target string `json:"target"`
}

// Create validates s, stores its spec as a config and its environment's
// values as secrets, and returns the sandbox's id (SandboxID of its service
// name). The
// service itself is created by WriteStdin, once the task-request exists.
// A finished sandbox of the same name is replaced; a running one is
// container.ErrConflict.
func (e *Engine) Create(ctx context.Context, s container.Spec) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	svc := ServiceName(s.Name)
	switch {
	case s.RequireRuntime:
		return "", fmt.Errorf("create %s: %w: Swarm mode services cannot choose an OCI runtime (%q); configure it as the default runtime of every node's engine and drop the requirement", s.Name, container.ErrRuntimeMissing, s.Runtime)
	case s.Runtime != "":
		e.log.Warn("Swarm mode services cannot choose a runtime; the nodes' default runtime is used", "container", s.Name, "runtime", s.Runtime)
	case s.MemorySwapBytes > s.MemoryBytes:
		e.log.Warn("Swarm mode services have no swap limit; only the memory limit applies", "container", s.Name)
	}
	if info, err := e.Inspect(ctx, svc); err == nil {
		if info.Running || info.Status == "created" && info.Labels[contract.LabelProject] != s.Labels[contract.LabelProject] {
			return "", fmt.Errorf("create %s: %w (status %s); stop it first or pick another name", s.Name, container.ErrConflict, info.Status)
		}
		if err := e.Remove(ctx, svc); err != nil {
			return "", fmt.Errorf("create %s: remove the previous sandbox of that name: %w", s.Name, err)
		}
	} else if !errors.Is(err, container.ErrNotFound) {
		return "", fmt.Errorf("create %s: %w", s.Name, err)
	}
	labels := map[string]string{contract.LabelSandbox: "true"}
	for k, v := range s.Labels {
		labels[k] = v
	}
	objLabels := func(kind string) map[string]string {
		l := map[string]string{contract.LabelSwarmObject: kind, contract.LabelContainer: s.Name}
		for k, v := range labels {
			l[k] = v
		}
		return l
	}
	st := storedSpec{
		Name: s.Name, Image: s.Image, Labels: labels, NanoCPUs: s.NanoCPUs, MemoryBytes: s.MemoryBytes,
		PidsLimit: s.PidsLimit, ReadOnlyRootfs: s.ReadOnlyRootfs, Scratch: s.Scratch, ExtraHosts: s.ExtraHosts,
		User: s.User, WorkingDir: s.WorkingDir, Cmd: s.Cmd, Created: time.Now().UTC().Format(time.RFC3339Nano),
	}
	undo := func() { _ = e.removeObjects(context.WithoutCancel(ctx), s.Name) }
	for i, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		_, err := e.cli.SecretCreate(ctx, swarm.SecretSpec{
			Annotations: swarm.Annotations{Name: objName(svc, fmt.Sprintf("env%d", i)), Labels: objLabels(objEnv)},
			Data:        []byte(v),
		})
		if err != nil {
			undo()
			// The key only: the value is a secret.
			return "", fmt.Errorf("create %s: store environment value %s as a Swarm secret: %w", s.Name, k, err)
		}
		st.EnvKeys = append(st.EnvKeys, k)
	}
	for i, m := range s.Mounts {
		if !m.ReadOnly {
			undo()
			return "", fmt.Errorf("create %s: %w: writable bind mount %s cannot follow a task to another node", s.Name, container.ErrInvalidSpec, m.Target)
		}
		data, err := readSmallFile(m.Source)
		if err != nil {
			undo()
			return "", fmt.Errorf("create %s: read-only mount %s: %w", s.Name, m.Target, err)
		}
		name := objName(svc, fmt.Sprintf("file%d", i))
		if _, err := e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: objLabels(objFile)}, Data: data}); err != nil {
			undo()
			return "", fmt.Errorf("create %s: store %s as a Swarm config: %w", s.Name, m.Source, err)
		}
		st.Files = append(st.Files, storedFile{Config: name, Target: m.Target})
	}
	data, err := json.Marshal(st)
	if err != nil {
		undo()
		return "", fmt.Errorf("create %s: %w", s.Name, err)
	}
	if _, err := e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: objName(svc, objSpec), Labels: objLabels(objSpec)}, Data: data}); err != nil {
		undo()
		return "", fmt.Errorf("create %s: store its spec as a Swarm config: %w", s.Name, err)
	}
	return SandboxID(svc), nil
}

func readSmallFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("%s must be a regular file of at most %d bytes to become a Swarm config", p, maxFileBytes)
	}
	return os.ReadFile(p)
}

// Start has nothing to do: the task starts when WriteStdin creates the
// service. A sandbox that was never created is container.ErrNotFound.
func (e *Engine) Start(ctx context.Context, id string) error {
	if _, err := e.Inspect(ctx, id); err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	return nil
}

// spec reads a sandbox's stored spec.
func (e *Engine) spec(ctx context.Context, svc string) (storedSpec, swarm.Config, error) {
	cfg, _, err := e.cli.ConfigInspectWithRaw(ctx, objName(svc, objSpec))
	if errdefs.IsNotFound(err) {
		return storedSpec{}, cfg, fmt.Errorf("sandbox %s: %w", svc, container.ErrNotFound)
	}
	if err != nil {
		return storedSpec{}, cfg, fmt.Errorf("read the spec of %s: %w", svc, err)
	}
	var st storedSpec
	if err := json.Unmarshal(cfg.Spec.Data, &st); err != nil {
		return st, cfg, fmt.Errorf("read the spec of %s: %w", svc, err)
	}
	return st, cfg, nil
}

// List reports every sandbox (service, or spec not yet a service) carrying
// all the given labels.
func (e *Engine) List(ctx context.Context, labels map[string]string) ([]container.Info, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	services, err := e.cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	seen := map[string]bool{}
	var out []container.Info
	for _, s := range services {
		info, err := e.Inspect(ctx, s.Spec.Name)
		if errors.Is(err, container.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		seen[s.Spec.Name] = true
		out = append(out, info)
	}
	cf := f.Clone()
	cf.Add("label", contract.LabelSwarmObject+"="+objSpec)
	cfgs, err := e.cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: cf})
	if err != nil {
		return nil, fmt.Errorf("list sandbox specs: %w", err)
	}
	for _, c := range cfgs {
		svc := ServiceName(c.Spec.Labels[contract.LabelContainer])
		if seen[svc] {
			continue
		}
		info, err := e.Inspect(ctx, svc)
		if errors.Is(err, container.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes the service (killing its task), its configs, secrets and
// network. A sandbox that does not exist is not an error.
func (e *Engine) Remove(ctx context.Context, id string) error {
	svc, err := e.serviceOf(ctx, id)
	if errors.Is(err, container.ErrNotFound) {
		return nil // the spec goes last: nothing is left
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	name := svc
	if st, _, err := e.spec(ctx, svc); err == nil {
		name = st.Name
	}
	e.forget(svc)
	if err := e.cli.ServiceRemove(ctx, svc); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove service %s: %w", svc, err)
	}
	return e.removeObjects(ctx, name)
}

// removeObjects removes the configs, secrets and network of a container
// name. Swarm refuses to remove a secret or network a task still uses for
// a moment after its service is gone, so each is retried briefly.
func (e *Engine) removeObjects(ctx context.Context, name string) error {
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+name))
	var errs []error
	retry := func(what string, fn func() error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := fn()
			if err == nil || errdefs.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("remove %s of %s: %w", what, name, err))
				return
			}
			if sleep(ctx, 250*time.Millisecond) != nil {
				errs = append(errs, fmt.Errorf("remove %s of %s: %w", what, name, ctx.Err()))
				return
			}
		}
	}
	secrets, err := e.cli.SecretList(ctx, swarm.SecretListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list secrets of %s: %w", name, err)
	}
	for _, s := range secrets {
		retry("secret", func() error { return e.cli.SecretRemove(ctx, s.ID) })
	}
	configs, err := e.cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list configs of %s: %w", name, err)
	}
	// The spec goes last: while it exists, a half-removed sandbox is still
	// listed and its removal can be retried.
	sort.Slice(configs, func(i, j int) bool {
		return configs[i].Spec.Labels[contract.LabelSwarmObject] != objSpec && configs[j].Spec.Labels[contract.LabelSwarmObject] == objSpec
	})
	nets, err := e.networksOf(ctx, name)
	if err != nil {
		return err
	}
	for _, n := range nets {
		retry("network", func() error { return e.cli.NetworkRemove(ctx, n) })
	}
	for _, c := range configs {
		retry("config", func() error { return e.cli.ConfigRemove(ctx, c.ID) })
	}
	return errors.Join(errs...)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
