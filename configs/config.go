package configs

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/internal/safefile"
	"github.com/aimi-tools/swarm/usage"
)

// DefaultYAML is the documented default configuration, the lowest layer.
//
//go:embed aimi.yaml
var DefaultYAML []byte

// File locations and names of the layers.
const (
	// maxConfigBytes bounds a config file (they are a few KiB).
	maxConfigBytes = 1 << 20
	// RepoConfigPath is the per-repository config file, relative to the repo root.
	RepoConfigPath = ".aimi/config.yaml"
	// userConfigRel is the user's config file below $XDG_CONFIG_HOME.
	userConfigRel = "aimi/config.yaml"
	// EnvPrefix starts every environment variable the config reads.
	EnvPrefix = "AIMI_"
)

// maxLimitMaxWait bounds agent.limit_max_wait: a week.
const maxLimitMaxWait = 7 * 24 * time.Hour

// Git modes (git.mode).
const (
	GitAuto   = "auto"
	GitLocal  = "local"
	GitRemote = "remote"
)

// Engine backends (engine.backend).
const (
	BackendDocker = "docker"
	BackendSwarm  = "swarm"
)

// Agent kinds (agent.kind).
const (
	AgentDemo = "demo"
	AgentACP  = "acp"
	AgentExec = "exec"
)

// Config is the validated configuration.
type Config struct {
	Engine  Engine
	Sandbox Sandbox
	Swarm   Swarm
	Agent   Agent
	Task    Task
	Git     Git
	Publish Publish
	Metrics Metrics
	// Models are the model gateway's providers (built-in and declared),
	// each with its upstream; the keys stay in Agent.Env.
	Models map[string]gateway.Provider
	Prices map[string]usage.Prices // models.<provider>.prices, per million tokens (prices.go)
	Notify Notify
	Egress Egress
	Land   Land
	// Warnings are non-fatal findings (e.g. an agent.env value naming an
	// unset variable); the daemon logs them. They never contain values.
	Warnings []string
}

// Sandbox is the per-container isolation and limits.
type Sandbox struct {
	Image           string
	CPUs            float64
	MemoryBytes     int64
	MemorySwapBytes int64 // memory + swap in total; -1 unlimited
	DiskBytes       int64 // 0: no limit; enforced where the storage driver can (aimid checks at start)
	Pids            int64
	Runtime         string
	RequireRuntime  bool
	ReadOnlyRoot    bool
	// WarmPool sandboxes of Image wait started for a task, each at most
	// WarmMaxAge (docs/warm-pool.md).
	WarmPool   int
	WarmMaxAge time.Duration
	// WarmPoolRepos bounds the repositories whose workspace image
	// (docs/workspaces.md) the daemon keeps.
	WarmPoolRepos int
}

// Swarm is the fan-out and supervision settings.
type Swarm struct {
	MaxContainers int
	Timeout       time.Duration
	StopGrace     time.Duration
	// Budget is what the swarm's model calls may spend (in the prices'
	// currency) before its containers begin no further story; 0: none.
	Budget float64
	// BudgetGrace is how far past Budget or Agent.StoryBudget, as a
	// fraction of that budget, the model gateway still lets a container's
	// calls through (0.1: 10 %).
	BudgetGrace float64
	// Attempts is how many times each task file runs (best of N,
	// docs/attempts.md); AttemptsStop is attempts.StopAll or
	// attempts.StopFirstVerified; ScoreCommand ranks the qualified
	// attempts ("" ranks them by their changed lines first).
	Attempts     int
	AttemptsStop string
	ScoreCommand string
}

// Agent is what the runner inside each container drives.
type Agent struct {
	Kind             string
	Command          string
	VerifyCommand    string
	PermissionPolicy string
	// HandshakeTimeout bounds each step of the agent's start-up
	// (initialize, authenticate, session/new) inside the runner.
	HandshakeTimeout time.Duration
	// StallTimeout is how long an agent's turn may go without ACP traffic
	// while nothing runs before the runner cancels it as stalled.
	StallTimeout time.Duration
	// LoopLimit is how many times in a row the same tool call with the
	// same input counts as a loop (0: no check).
	LoopLimit int
	// LimitMaxWait bounds the reset a provider's limited answer asks for
	// (a negative, garbled or enormous retry-after is cut to it).
	LimitMaxWait time.Duration
	// LimitRetries is how many times a story a provider's limit ended is
	// run again after the reset (0: it fails).
	LimitRetries int
	// StoryBudget is what one story's model calls may spend before its
	// container begins no further story; 0: none.
	StoryBudget float64
	// AskTimeout is how long a permission request waits for a person
	// before AskFallback (allow or reject) answers it.
	AskTimeout  time.Duration
	AskFallback string
	Env         Secrets
	// Variants are the agents or models a task file's attempts go round
	// (agent.variants); none: every attempt runs the agent above.
	Variants []Variant
}

// Task is what goes into every task-request.
type Task struct {
	EnvVars map[string]string
}

// Git is where containers clone from and push to.
type Git struct {
	Mode string
	// Address: the IP of this machine every node of a cluster reaches; the
	// swarm backend's local-mode git service listens there ("": docker).
	Address  string
	OriginCA string // remote mode: host path of the PEM CA origin chains to ("": system roots)
	// MaxPush and MaxMirror bound one push and what one swarm's pushes add
	// to the git service's copy of the repository (bytes).
	MaxPush, MaxMirror int64
	// MaxWorkspace bounds a ready-made workspace the git service writes
	// (bytes, at most contract.MaxWorkspaceBytes).
	MaxWorkspace int64
}

// Engine is where the sandboxes run.
type Engine struct {
	// Backend is BackendDocker (one engine) or BackendSwarm (services on a
	// Docker Swarm mode cluster through a manager).
	Backend string
	// Host is the Engine API endpoint (a DOCKER_HOST value); "" means the
	// Docker client's conventions (DOCKER_HOST, DOCKER_TLS_VERIFY,
	// DOCKER_CERT_PATH, else the local socket).
	Host string
	// NodeHost is the swarm backend's template of each node's Engine API
	// endpoint ({node}: the node's hostname, {addr}: its address as the
	// manager lists it); "" when the nodes' engines are not reachable.
	NodeHost string
}

// Metrics is the daemon's Prometheus endpoint.
// Land is how a swarm's branches land (aimi swarm land).
type Land struct {
	// Auto lands each container as it completes (a merge train): the
	// integration branch grows while the rest still work.
	Auto bool
	// FixAttempts is how many fix-up runs a conflicted or failed merge
	// gets before its branch is held (0: none, held at once).
	FixAttempts int
	// VerifyCommand checks each merge and each fix-up; "": the agent's
	// (agent.verify_command); neither: no check.
	VerifyCommand string
}

type Metrics struct {
	// Listen is the host:port of /metrics and /healthz; "" turns them off.
	// A bare port (9464 or :9464) listens on loopback only.
	Listen string
	// Pprof also serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ on Listen: for finding where the daemon's memory and
	// time go, off by default.
	Pprof bool
}

// Publish is how finished branches become pull requests.
type Publish struct {
	GitHubAPI string
	TokenEnv  string
}

// LoadOptions says where the layers come from. The zero value loads the
// embedded defaults, the user's file and the process environment.
type LoadOptions struct {
	// RepoPath, when set, adds <RepoPath>/.aimi/config.yaml as a layer.
	RepoPath string
	// UserConfigPath overrides $XDG_CONFIG_HOME/aimi/config.yaml; "-" means none.
	UserConfigPath string
	// Flags, when set, must have been registered with AddFlags; flags the
	// user changed win over every other layer.
	Flags *pflag.FlagSet
	// LookupEnv reads the environment (default os.LookupEnv); used for
	// AIMI_* variables, ${VAR} in agent.env and $XDG_CONFIG_HOME/$HOME.
	LookupEnv func(string) (string, bool)
}

// Load merges the layers and validates the result. Every problem is reported,
// one per line, each naming the key, the bad value, where it came from and
// the fix.
func Load(opts LoadOptions) (*Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(DefaultYAML)); err != nil {
		return nil, fmt.Errorf("read embedded default config: %w (this is a build bug)", err)
	}
	l := &layers{v: v}
	if opts.RepoPath != "" {
		l.addFile(filepath.Join(opts.RepoPath, RepoConfigPath), func() ([]byte, error) {
			return safefile.ReadIn(opts.RepoPath, RepoConfigPath, maxConfigBytes)
		})
	}
	if p := userConfigPath(opts.UserConfigPath, lookup); p != "" {
		l.addFile(p, func() ([]byte, error) { return safefile.Read(p, maxConfigBytes) })
	}
	// The environment is merged as a config layer (rather than viper's
	// AutomaticEnv) so that LookupEnv can be injected and so that flags,
	// bound below, still win.
	envLayer := map[string]any{}
	for _, k := range scalarKeys {
		if val, ok := lookup(EnvName(k.name)); ok {
			setNested(envLayer, k.name, val)
			l.sources = append(l.sources, source{name: EnvName(k.name), key: k.name})
		}
	}
	if err := v.MergeConfigMap(envLayer); err != nil {
		return nil, fmt.Errorf("merge environment: %w", err)
	}
	if opts.Flags != nil {
		for _, k := range scalarKeys {
			f := opts.Flags.Lookup(FlagName(k.name))
			if f == nil || !f.Changed {
				continue
			}
			if err := v.BindPFlag(k.name, f); err != nil {
				return nil, fmt.Errorf("bind flag --%s: %w", f.Name, err)
			}
			l.sources = append(l.sources, source{name: "--" + f.Name, key: k.name})
		}
	}
	cfg, vprobs := build(v, l.sources, lookup)
	probs := append(l.probs, vprobs...)
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	return cfg, nil
}

// layers are the configuration files Load merges, the sources of their
// keys and what was wrong with them.
type layers struct {
	v       *viper.Viper
	sources []source
	probs   []string
}

// addFile merges the file at path (read with read) into the layers, unless
// it is missing. read is safefile's: a repository's config is the
// repository's content, and a FIFO or a link to /dev/zero there must not
// hang or fill the daemon.
func (l *layers) addFile(path string, read func() ([]byte, error)) {
	data, err := read()
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		l.probs = append(l.probs, fmt.Sprintf("%s: %v; make it readable or remove it", path, err))
		return
	}
	lv := viper.New()
	lv.SetConfigType("yaml")
	if err := lv.ReadConfig(bytes.NewReader(data)); err != nil {
		l.probs = append(l.probs, fmt.Sprintf("%s: not valid YAML: %v", path, err))
		return
	}
	for _, k := range lv.AllKeys() {
		if !known(k) {
			l.probs = append(l.probs, fmt.Sprintf("%s: unknown key %q; known keys are listed in configs/aimi.yaml", path, k))
		}
	}
	if err := l.v.MergeConfigMap(lv.AllSettings()); err != nil {
		l.probs = append(l.probs, fmt.Sprintf("%s: %v", path, err))
		return
	}
	l.sources = append(l.sources, source{name: path, v: lv})
}

// Error is a config that failed validation; each problem names its key.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "invalid config:\n  " + strings.Join(e.Problems, "\n  ")
}

// source is one layer above the defaults, used to say where a bad value came
// from: a file (v set) or a single key from an env variable or flag.
type source struct {
	name string
	key  string
	v    *viper.Viper
}

// origin names the strongest layer that set key.
func origin(sources []source, k string) string {
	for i := len(sources) - 1; i >= 0; i-- {
		s := sources[i]
		if s.key == k || (s.v != nil && s.v.IsSet(k)) {
			return s.name
		}
	}
	return "default config"
}

func setNested(m map[string]any, dotted string, val any) {
	parts := strings.Split(dotted, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = val
}

func userConfigPath(override string, lookup func(string) (string, bool)) string {
	switch override {
	case "-":
		return ""
	case "":
	default:
		return override
	}
	if d, ok := lookup("XDG_CONFIG_HOME"); ok && d != "" {
		return filepath.Join(d, userConfigRel)
	}
	if h, ok := lookup("HOME"); ok && h != "" {
		return filepath.Join(h, ".config", userConfigRel)
	}
	return ""
}

var (
	kindListRE = regexp.MustCompile(`^(allow|ask)-kinds:[a-z_]+(,[a-z_]+)*$`)
)

// build validates every key, collecting all problems.
func build(v *viper.Viper, sources []source, lookup func(string) (string, bool)) (*Config, []string) {
	r := &reader{v: v, sources: sources}
	var c Config
	r.sandbox(&c)
	c.Swarm.MaxContainers = int(r.integer("swarm.max_containers", 1, 256))
	c.Swarm.Timeout = r.duration("swarm.timeout")
	c.Swarm.StopGrace = r.duration("swarm.stop_grace")
	r.agent(&c, lookup)
	r.gitAndEngine(&c)
	r.budgets(&c)
	r.publishAndMetrics(&c)
	c.Egress.Ask = r.boolean(EgressAskKey)
	c.Egress.AskWait = r.duration(EgressAskWaitKey)
	mprobs := models(v, sources, &c)
	r.attempts(&c)
	probs := append(r.probs, mprobs...)
	var nprobs []string
	c.Notify, nprobs = notifyConfig(v)
	probs = append(probs, nprobs...)
	return &c, append(probs, c.Egress.read(v, sources)...)
}

// sandbox reads the sandbox section: image, limits and runtime.
func (r *reader) sandbox(c *Config) {
	c.Sandbox.Image = r.str("sandbox.image")
	if c.Sandbox.Image == "" || strings.ContainsAny(c.Sandbox.Image, " \t\n") {
		r.bad("sandbox.image", c.Sandbox.Image, "is not an image reference", "use a name like aimi-sandbox:latest")
	}
	cpus := r.str("sandbox.cpus")
	if f, err := strconv.ParseFloat(cpus, 64); err != nil || f <= 0 || f > 1024 {
		r.bad("sandbox.cpus", cpus, "is not a CPU count", "use a positive number such as 2 or 1.5")
	} else {
		c.Sandbox.CPUs = f
	}
	c.Sandbox.MemoryBytes = r.size("sandbox.memory", false, false)
	c.Sandbox.MemorySwapBytes = r.size("sandbox.swap", false, true)
	if c.Sandbox.MemoryBytes > 0 && c.Sandbox.MemorySwapBytes > 0 && c.Sandbox.MemorySwapBytes < c.Sandbox.MemoryBytes {
		r.bad("sandbox.swap", r.str("sandbox.swap"), "is smaller than sandbox.memory "+r.str("sandbox.memory"),
			"swap is memory+swap in total: use at least the memory value, or -1 for unlimited")
	}
	c.Sandbox.DiskBytes = r.size("sandbox.disk", true, false)
	c.Sandbox.Pids = r.integer("sandbox.pids", 16, 1<<22)
	c.Sandbox.Runtime = r.str("sandbox.runtime")
	if c.Sandbox.Runtime != "" && !contract.ValidRuntime(c.Sandbox.Runtime) {
		r.bad("sandbox.runtime", c.Sandbox.Runtime, "is not a runtime name", `use "" for the engine default or e.g. sysbox-runc`)
	}
	c.Sandbox.RequireRuntime = r.boolean("sandbox.require_runtime")
	if c.Sandbox.RequireRuntime && c.Sandbox.Runtime == "" {
		r.bad("sandbox.require_runtime", "true", "needs sandbox.runtime", "set sandbox.runtime (e.g. sysbox-runc) or require_runtime: false")
	}
	c.Sandbox.ReadOnlyRoot = r.boolean("sandbox.read_only_root")
	c.Sandbox.WarmPool = int(r.integer("sandbox.warm_pool", 0, 256))
	c.Sandbox.WarmMaxAge = r.duration("sandbox.warm_max_age")
	c.Sandbox.WarmPoolRepos = int(r.integer("sandbox.warm_pool_repos", 1, 64))
}

// agent reads the agent section and the tasks' environment.
func (r *reader) agent(c *Config, lookup func(string) (string, bool)) {
	c.Agent.Kind = r.oneOf("agent.kind", AgentDemo, AgentACP, AgentExec)
	c.Agent.Command = r.str("agent.command")
	if (c.Agent.Kind == AgentACP || c.Agent.Kind == AgentExec) && c.Agent.Command == "" {
		r.bad("agent.command", "", "is empty but agent.kind is "+c.Agent.Kind, "set the agent's command line, e.g. claude-agent-acp")
	}
	c.Agent.VerifyCommand = r.str("agent.verify_command")
	c.Agent.PermissionPolicy = r.str("agent.permission_policy")
	if p := c.Agent.PermissionPolicy; p != "allow" && p != "reject" && p != "ask" && !kindListRE.MatchString(p) {
		r.bad("agent.permission_policy", p, "is not a policy", "use allow, reject, allow-kinds:read,edit, ask or ask-kinds:execute,delete")
	}
	c.Agent.HandshakeTimeout = r.duration("agent.handshake_timeout")
	c.Agent.StallTimeout = r.duration("agent.stall_timeout")
	c.Agent.LoopLimit = int(r.integer("agent.loop_limit", 0, 10000))
	c.Agent.LimitRetries = int(r.integer("agent.limit_retries", 0, 1000))
	if c.Agent.LimitMaxWait = r.duration("agent.limit_max_wait"); c.Agent.LimitMaxWait > maxLimitMaxWait {
		r.bad("agent.limit_max_wait", r.str("agent.limit_max_wait"), "is longer than a week", "use a duration up to 168h, e.g. 6h")
	}
	c.Agent.AskTimeout = r.duration("agent.ask_timeout")
	c.Agent.AskFallback = r.oneOf("agent.ask_fallback", "reject", "allow")
	env, eprobs, warns := stringMap(r.v, "agent.env", r.sources, lookup, true)
	r.probs = append(r.probs, eprobs...)
	c.Agent.Env = env
	c.Warnings = warns
	ev, eprobs, _ := stringMap(r.v, "task.env_vars", r.sources, lookup, false)
	r.probs = append(r.probs, eprobs...)
	c.Task.EnvVars = ev
}

// gitAndEngine reads the git and engine sections, which check each other.
func (r *reader) gitAndEngine(c *Config) {
	c.Git.Mode = r.oneOf("git.mode", GitAuto, GitLocal, GitRemote)
	c.Git.Address = r.str("git.address")
	if a := c.Git.Address; a != "" && net.ParseIP(a) == nil {
		r.bad("git.address", a, "is not an IP address", "use the IP address of this machine that every node reaches, e.g. 10.0.0.5")
	}
	c.Git.MaxPush, c.Git.MaxMirror = r.size("git.max_push", false, false), r.size("git.max_mirror", false, false)
	if c.Git.MaxPush > 0 && c.Git.MaxMirror > 0 && c.Git.MaxMirror < c.Git.MaxPush {
		r.bad("git.max_mirror", r.str("git.max_mirror"), "is smaller than git.max_push "+r.str("git.max_push"), "raise git.max_mirror or lower git.max_push: a swarm must fit one push")
	}
	c.Git.MaxWorkspace = r.size("git.max_workspace", false, false)
	if c.Git.MaxWorkspace > contract.MaxWorkspaceBytes {
		r.bad("git.max_workspace", r.str("git.max_workspace"), "is larger than a runner unpacks (1g)", "use 1g or less: a larger workspace is cloned by its runner anyway")
	}
	c.Git.OriginCA = originCA(r.str("git.origin_ca"), r.bad)
	c.Engine.Backend = r.oneOf("engine.backend", BackendDocker, BackendSwarm)
	c.Engine.Host = r.str("engine.host")
	if h := c.Engine.Host; h != "" {
		if _, err := client.ParseHostURL(h); err != nil || !strings.Contains(h, "://") {
			r.bad("engine.host", h, "is not an Engine API endpoint", "use unix:///path/docker.sock, tcp://host:2376 or ssh://user@host, or leave it empty for DOCKER_HOST")
		}
	}
	c.Engine.NodeHost = r.str("engine.node_host")
	if h := c.Engine.NodeHost; h != "" {
		probe := strings.NewReplacer("{node}", "node", "{addr}", "10.0.0.1").Replace(h)
		if _, err := client.ParseHostURL(probe); err != nil || !strings.Contains(h, "://") {
			r.bad("engine.node_host", h, "is not an Engine API endpoint template", "use e.g. tcp://{addr}:2376 or tcp://{node}.example:2376, or leave it empty")
		}
	}
	if c.Engine.Backend == BackendSwarm && c.Git.Mode != GitRemote && c.Git.Address == "" {
		r.bad("git.address", "", "is empty but engine.backend is swarm and git.mode is "+c.Git.Mode,
			"set git.address to an IP of this machine every node reaches (the local git service listens there), or set git.mode: remote")
	}
}

// publishAndMetrics reads the publish and metrics sections.
func (r *reader) publishAndMetrics(c *Config) {
	c.Publish.GitHubAPI = r.str("publish.github_api")
	if u := c.Publish.GitHubAPI; !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		r.bad("publish.github_api", u, "is not an http(s) URL", "use e.g. https://api.github.com")
	}
	c.Land.Auto = r.boolean("land.auto")
	c.Land.FixAttempts = int(r.integer("land.fix_attempts", 0, 5))
	c.Land.VerifyCommand = r.str("land.verify_command")
	c.Publish.TokenEnv = r.str("publish.token_env")
	if !contract.ValidEnvKey(c.Publish.TokenEnv) {
		r.bad("publish.token_env", c.Publish.TokenEnv, "is not an environment variable name", "use a name like GITHUB_TOKEN (the token itself stays in the environment)")
	}
	listen, err := metricsListen(r.str("metrics.listen"))
	if err != nil {
		r.bad("metrics.listen", r.str("metrics.listen"), err.Error(), "use host:port such as 127.0.0.1:9464, a bare port for loopback, or empty to turn metrics off")
	}
	c.Metrics.Listen = listen
	c.Metrics.Pprof = r.boolean("metrics.pprof")
	if c.Metrics.Pprof && listen == "" {
		r.bad("metrics.pprof", "true", "needs metrics.listen", "set metrics.listen (e.g. 127.0.0.1:9464) or metrics.pprof: false")
	}
}

// Files are the configuration files Load reads for o: the repository's
// (with RepoPath) and the user's, whether or not they exist.
func (o LoadOptions) Files() []string {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var out []string
	if o.RepoPath != "" {
		out = append(out, filepath.Join(o.RepoPath, RepoConfigPath))
	}
	if p := userConfigPath(o.UserConfigPath, lookup); p != "" {
		out = append(out, p)
	}
	return out
}
