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

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

const (
	objSpec    = "spec"
	objRequest = "request"
	objEnv     = "env"
	objFile    = "file"
	// objStopped marks a sandbox stopped before its task-request was
	// delivered: it never gets a service.
	objStopped = "stopped"
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
	// Instance is the daemon instance (contract.LabelDaemon) whose
	// sandboxes this engine makes and sees: another instance's services,
	// configs, secrets and networks on the cluster are never touched.
	Instance string
	// CallTimeout bounds every engine call but a followed log; default
	// 30 s. A manager that does not answer cannot hang a stop or a
	// cleanup.
	CallTimeout time.Duration
	// NodeHost is every node's Engine API endpoint, {node} standing for
	// its hostname and {addr} for its address (the daemon's
	// engine.node_host); "" when the nodes' engines are not reachable.
	// Remove uses it for the task containers the cluster leaves on the
	// nodes (leftover.go).
	NodeHost string
	// NodeClient connects to a node's engine at an endpoint; default: the
	// Docker client with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
	NodeClient func(host string) (client.APIClient, error)
}

// Engine runs sandboxes as Swarm mode services through a manager's API. It
// is safe for concurrent use.
type Engine struct {
	cli  client.APIClient
	opts Options
	log  *slog.Logger

	mu          sync.Mutex
	nodes       map[string]string           // node id -> hostname
	memos       map[string]*memo            // service name -> its own task as last seen
	nodeClients map[string]client.APIClient // node engine endpoint -> its client
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
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.NodeClient == nil {
		opts.NodeClient = defaultNodeClient
	}
	cli = timedClient{APIClient: cli, d: opts.CallTimeout}
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (check engine.host or DOCKER_HOST)", engine.ErrEngineUnavailable, err)
	}
	if info.Swarm.LocalNodeState != swarm.LocalNodeStateActive {
		return nil, fmt.Errorf("the engine at %s is not part of a swarm (state %q): point engine.host at a Swarm mode manager, run 'docker swarm init' there, or set engine.backend to docker", cli.DaemonHost(), info.Swarm.LocalNodeState)
	}
	if !info.Swarm.ControlAvailable {
		return nil, fmt.Errorf("the engine at %s is a swarm worker: point engine.host at a manager node (docker node ls there shows the managers)", cli.DaemonHost())
	}
	return &Engine{cli: cli, opts: opts, log: opts.Logger, nodes: map[string]string{}, memos: map[string]*memo{}, nodeClients: map[string]client.APIClient{}}, nil
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

// storedSpec is a sandbox's spec as kept in its spec config until the
// service is created: everything but the environment's values, which are
// secrets.
type storedSpec struct {
	Name    string            `json:"name"`
	Service string            `json:"service"` // empty in specs made before it was stored
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
	// Relay confines the sandbox to its network and its relay (relay.go).
	Relay *storedRelay `json:"relay,omitempty"`
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
func (e *Engine) Create(ctx context.Context, s engine.Spec) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	switch {
	case s.RequireRuntime:
		return "", fmt.Errorf("create %s: %w: Swarm mode services cannot choose an OCI runtime (%q); configure it as the default runtime of every node's engine and drop the requirement", s.Name, engine.ErrRuntimeMissing, s.Runtime)
	case s.Runtime != "":
		e.log.Warn("Swarm mode services cannot choose a runtime; the nodes' default runtime is used", "container", s.Name, "runtime", s.Runtime)
	case s.MemorySwapBytes > s.MemoryBytes:
		e.log.Warn("Swarm mode services have no swap limit; only the memory limit applies", "container", s.Name)
	}
	labels := map[string]string{contract.LabelSandbox: "true"}
	for k, v := range s.Labels {
		labels[k] = v
	}
	if e.opts.Instance != "" {
		labels[contract.LabelDaemon] = e.opts.Instance
	}
	labels[contract.LabelContainer] = s.Name
	svc := ServiceName(labels[contract.LabelDaemon], contract.Sandbox{Swarm: labels[contract.LabelSwarmID], Container: s.Name})
	if err := e.replacePrevious(ctx, s, svc); err != nil {
		return "", err
	}
	objLabels := func(kind string) map[string]string {
		l := map[string]string{contract.LabelSwarmObject: kind}
		for k, v := range labels {
			l[k] = v
		}
		return l
	}
	st := storedSpec{
		Name: s.Name, Service: svc, Image: s.Image, Labels: labels, NanoCPUs: s.NanoCPUs, MemoryBytes: s.MemoryBytes,
		PidsLimit: s.PidsLimit, ReadOnlyRootfs: s.ReadOnlyRootfs, Scratch: s.Scratch, ExtraHosts: s.ExtraHosts,
		User: s.User, WorkingDir: s.WorkingDir, Cmd: s.Cmd, Created: time.Now().UTC().Format(time.RFC3339Nano),
	}
	// A failed create takes back exactly what it made, by id: never an
	// object of the same name someone else made meanwhile.
	var made []func(context.Context) error
	undo := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.CallTimeout)
		defer cancel()
		for _, rm := range made {
			if err := rm(uctx); err != nil && !errdefs.IsNotFound(err) {
				e.log.Warn("a failed create could not remove what it made", "container", s.Name, "err", err)
			}
		}
	}
	made, err := e.storeInputs(ctx, s, svc, objLabels, &st)
	if err == nil {
		var more []func(context.Context) error
		more, err = e.storeRelay(ctx, s, svc, objLabels, &st)
		made = append(made, more...)
	}
	if err != nil {
		undo()
		return "", err
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

// storeInputs stores the environment's values as secrets and the read-only
// files as configs, returning how to remove each (by id) and filling in
// st's keys and files. On error, what it made is in the returned list.
func (e *Engine) storeInputs(ctx context.Context, s engine.Spec, svc string, objLabels func(string) map[string]string, st *storedSpec) ([]func(context.Context) error, error) {
	var made []func(context.Context) error
	for i, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		resp, err := e.cli.SecretCreate(ctx, swarm.SecretSpec{
			Annotations: swarm.Annotations{Name: objName(svc, fmt.Sprintf("env%d", i)), Labels: objLabels(objEnv)},
			Data:        []byte(v),
		})
		if err != nil {
			// The key only: the value is a secret.
			return made, fmt.Errorf("create %s: store environment value %s as a Swarm secret: %w", s.Name, k, err)
		}
		made = append(made, func(ctx context.Context) error { return e.cli.SecretRemove(ctx, resp.ID) })
		st.EnvKeys = append(st.EnvKeys, k)
	}
	for i, m := range s.Mounts {
		if !m.ReadOnly {
			return made, fmt.Errorf("create %s: %w: writable bind mount %s cannot follow a task to another node", s.Name, engine.ErrInvalidSpec, m.Target)
		}
		data, err := readSmallFile(m.Source)
		if err != nil {
			return made, fmt.Errorf("create %s: read-only mount %s: %w", s.Name, m.Target, err)
		}
		name := objName(svc, fmt.Sprintf("file%d", i))
		resp, err := e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: objLabels(objFile)}, Data: data})
		if err != nil {
			return made, fmt.Errorf("create %s: store %s as a Swarm config: %w", s.Name, m.Source, err)
		}
		made = append(made, func(ctx context.Context) error { return e.cli.ConfigRemove(ctx, resp.ID) })
		st.Files = append(st.Files, storedFile{Config: name, Target: m.Target})
	}
	return made, nil
}

// replacePrevious removes this instance's finished sandbox of the same
// name before a create; a running one, or one created for another
// repository and not started, is container.ErrConflict.
func (e *Engine) replacePrevious(ctx context.Context, s engine.Spec, svc string) error {
	for _, ref := range []string{s.Name, SandboxID(svc)} {
		info, err := e.Inspect(ctx, ref)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", s.Name, err)
		}
		if info.Running || info.Status == "created" && info.Labels[contract.LabelProject] != s.Labels[contract.LabelProject] {
			return fmt.Errorf("create %s: %w (status %s); stop it first or pick another name", s.Name, engine.ErrConflict, info.Status)
		}
		err = e.Remove(ctx, info.ID)
		if errors.Is(err, engine.ErrLeftOnNode) {
			// Gone from the cluster; what a node kept does not hold the name.
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: remove the previous sandbox of that name: %w", s.Name, err)
		}
	}
	return nil
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
func (e *Engine) spec(ctx context.Context, sb sandbox) (storedSpec, swarm.Config, error) {
	cfg, _, err := e.cli.ConfigInspectWithRaw(ctx, objName(sb.svc, objSpec))
	if errdefs.IsNotFound(err) || err == nil && !sb.own.owns(cfg.Spec.Labels) {
		return storedSpec{}, cfg, fmt.Errorf("sandbox %s: %w", sb.svc, engine.ErrNotFound)
	}
	if err != nil {
		return storedSpec{}, cfg, fmt.Errorf("read the spec of %s: %w", sb.svc, err)
	}
	var st storedSpec
	if err := json.Unmarshal(cfg.Spec.Data, &st); err != nil {
		return st, cfg, fmt.Errorf("read the spec of %s: %w", sb.svc, err)
	}
	return st, cfg, nil
}

// List reports every sandbox of this instance (service, or spec not yet a
// service) carrying all the given labels.
func (e *Engine) List(ctx context.Context, labels map[string]string) ([]engine.Info, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	if e.opts.Instance != "" {
		f.Add("label", contract.LabelDaemon+"="+e.opts.Instance)
	}
	services, err := e.cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	seen := map[string]bool{}
	var out []engine.Info
	add := func(svc string) error {
		if seen[svc] {
			return nil
		}
		seen[svc] = true
		info, err := e.Inspect(ctx, SandboxID(svc))
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err == nil {
			out = append(out, info)
		}
		return err
	}
	for _, s := range services {
		if !e.mine(s.Spec.Labels) {
			continue
		}
		if err := add(s.Spec.Name); err != nil {
			return nil, err
		}
	}
	cf := f.Clone()
	cf.Add("label", contract.LabelSwarmObject+"="+objSpec)
	cfgs, err := e.cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: cf})
	if err != nil {
		return nil, fmt.Errorf("list sandbox specs: %w", err)
	}
	for _, c := range cfgs {
		sb, err := e.sandboxOfSpec(c, c.Spec.Name)
		if err != nil {
			continue // another instance's, or not a sandbox's spec
		}
		if err := add(sb.svc); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes the service (killing its task), its configs, secrets and
// network: only objects carrying the sandbox's instance, swarm and name,
// and then the task containers the cluster leaves on the nodes
// (leftover.go); those it could not remove are an error wrapping
// engine.ErrLeftOnNode. A sandbox that does not exist is not an error.
func (e *Engine) Remove(ctx context.Context, id string) error {
	sb, err := e.serviceOf(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return nil // the spec goes last: nothing is left
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	e.forget(sb.svc)
	if err := e.removeRelay(ctx, sb); err != nil {
		return err
	}
	s, err := e.inspectService(ctx, sb)
	var left []taskContainer
	if err == nil {
		left = e.taskContainers(ctx, s.ID)
		err = e.cli.ServiceRemove(ctx, s.ID)
	}
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove service %s: %w", sb.svc, err)
	}
	if err := e.removeObjects(ctx, sb); err != nil {
		return err
	}
	return e.removeLeftovers(ctx, sb, left)
}

// removeWindow is how long removeObjects retries, in all: Swarm refuses to
// remove a secret or network a task still uses for a moment after its
// service is gone.
const removeWindow = 30 * time.Second

// removeObjects removes the configs, secrets and network of a sandbox:
// those carrying its labels and named after its service, nothing else.
func (e *Engine) removeObjects(ctx context.Context, sb sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, removeWindow)
	defer cancel()
	f, prefix, name := sb.own.filter(), objPrefix(sb.svc), sb.own.name
	ours := func(objName string, labels map[string]string) bool {
		return strings.HasPrefix(objName, prefix) && sb.own.owns(labels)
	}
	var errs []error
	retry := func(what string, fn func() error) {
		for {
			err := fn()
			if err == nil || errdefs.IsNotFound(err) {
				return
			}
			if ctxutil.Sleep(ctx, 250*time.Millisecond) != nil {
				errs = append(errs, fmt.Errorf("remove %s of %s: %w", what, name, err))
				return
			}
		}
	}
	secrets, err := e.cli.SecretList(ctx, swarm.SecretListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list secrets of %s: %w", name, err)
	}
	for _, s := range secrets {
		if ours(s.Spec.Name, s.Spec.Labels) {
			retry("secret", func() error { return e.cli.SecretRemove(ctx, s.ID) })
		}
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
	nets, err := e.networksOf(ctx, sb)
	if err != nil {
		return err
	}
	rnets, err := e.relayNetworksOf(ctx, sb)
	if err != nil {
		return err
	}
	nets = append(nets, rnets...)
	for _, n := range nets {
		retry("network", func() error { return networkGone(e.cli.NetworkRemove(ctx, n)) })
	}
	for _, c := range configs {
		if ours(c.Spec.Name, c.Spec.Labels) {
			retry("config", func() error { return e.cli.ConfigRemove(ctx, c.ID) })
		}
	}
	return errors.Join(errs...)
}

// networkGone is nil for a network remove that failed because the cluster
// has no such network any more: listed a moment before (a node's copy of an
// overlay the managers already deleted, seen after a node was lost), it is
// answered with a server error saying "not found", not a 404, and retrying
// it until removeWindow failed the next create of the name.
func networkGone(err error) error {
	if err != nil && strings.Contains(err.Error(), "not found") {
		return nil
	}
	return err
}

var _ engine.Engine = (*Engine)(nil)
