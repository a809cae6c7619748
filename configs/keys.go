package configs

import (
	"strings"

	"github.com/spf13/pflag"
)

// key describes one scalar config key.
type key struct {
	name string // dotted, as in the YAML file
	help string // one line, for the flag
}

// scalarKeys are every key that takes one value; agent.env and task.env_vars
// are maps and come from files only.
var scalarKeys = []key{
	{"engine.backend", "docker (one engine) or swarm (a Swarm mode cluster)"},
	{"engine.host", "Engine API endpoint, e.g. tcp://manager:2376 (default: DOCKER_HOST)"},
	{"engine.node_host", "swarm backend: each node's Engine API endpoint, {node} its hostname, {addr} its address, e.g. tcp://{addr}:2376 (empty: none; cleanup then lists what it left on the nodes)"},
	{"sandbox.image", "image every sandbox container runs"},
	{"sandbox.cpus", "CPUs per container"},
	{"sandbox.memory", "memory limit per container (e.g. 4g)"},
	{"sandbox.swap", "memory+swap per container in total (e.g. 8g; -1 unlimited)"},
	{"sandbox.disk", "writable-layer size limit per container, where the storage driver can (aimid says at start when not)"},
	{"sandbox.pids", "process limit per container"},
	{"sandbox.runtime", `OCI runtime ("" or sysbox-runc)`},
	{"sandbox.require_runtime", "refuse to run when the runtime is missing"},
	{"sandbox.read_only_root", "read-only root filesystem"},
	{"sandbox.warm_pool", "sandboxes kept started and waiting for a task (0: none)"},
	{"sandbox.warm_max_age", "longest a warm sandbox waits before it is replaced"},
	{"sandbox.warm_pool_repos", "repositories whose workspace image aimid keeps (docs/workspaces.md)"},
	{"swarm.max_containers", "containers running at once"},
	{"swarm.timeout", "time limit per container"},
	{"swarm.stop_grace", "time between SIGTERM and SIGKILL on stop"},
	{"swarm.budget", "spend of a swarm's model calls after which its containers begin no further story (0: none)"},
	{"swarm.budget_grace", "how far past swarm.budget or agent.story_budget (a percentage of it) the model gateway still passes a container's calls before it refuses them"},
	{"swarm.attempts", "times each task file runs, each attempt in its own container and branch, the best one picked (1: once)"},
	{"swarm.attempts_stop", "all (every attempt runs to its end) or first-verified (a task file's other attempts stop once one qualifies)"},
	{"swarm.score_command", "command run on each qualified attempt's tip in a sandbox; its last line, a number, ranks them (higher wins)"},
	{"agent.kind", "agent kind: demo, acp or exec"},
	{"agent.command", "agent command line (acp, exec)"},
	{"agent.verify_command", "command run after each story"},
	{"agent.permission_policy", "allow, reject, allow-kinds:k1,k2, ask or ask-kinds:k1,k2"},
	{"agent.ask_timeout", "time a permission request waits for a person (policy ask)"},
	{"agent.ask_fallback", "answer after agent.ask_timeout: reject or allow"},
	{"agent.handshake_timeout", "time an ACP agent gets to answer each of initialize and session/new"},
	{"agent.stall_timeout", "silence (no ACP traffic, nothing running) after which a story's turn is cancelled as stalled"},
	{"agent.loop_limit", "repeats in a row of one tool call with the same input that count as a loop (0: off)"},
	{"agent.limit_max_wait", "longest wait a provider's limit may ask for (retry-after and reset headers are cut to it)"},
	{"agent.limit_retries", "retries of a story whose agent's turn ended in error while a provider's limit held its model calls (0: fail it)"},
	{"agent.story_budget", "spend of one story's model calls after which its container begins no further story (0: none)"},
	{"git.mode", "auto, local or remote"},
	{"git.address", "IP of this machine every cluster node reaches (swarm backend, local git)"},
	{"git.max_push", "largest push a container may send to the local git service (e.g. 100m)"},
	{"git.max_mirror", "what one swarm's pushes may add to the local git service's disk (e.g. 1g)"},
	{"git.max_workspace", "largest ready-made workspace the local git service writes to disk for a runner (at most 1g; larger: the runner clones)"},
	{"git.origin_ca", "PEM CA bundle origin's certificate chains to (remote mode; empty: system roots)"},
	{"land.auto", "land each container as it completes (aimi swarm land, as a merge train)"},
	{"land.verify_command", "command run on each merged tree and each fix-up (default: agent.verify_command)"},
	{"land.fix_attempts", "fix-up runs a conflicted or failed merge gets before its branch is held (0 to 5)"},
	{EgressAskKey, "hold a connection egress.allow refuses and ask a person in the inbox (a repository may set it for its swarms)"},
	{EgressAskWaitKey, "how long such a connection is held for an answer (the request stays in the inbox until agent.ask_timeout)"},
	{"publish.github_api", "GitHub REST API base URL"},
	{"publish.token_env", "name of the env variable holding the GitHub token"},
	{"notify.board_url", "link to the board put into notices (without its token)"},
	{"metrics.listen", "host:port of /metrics and /healthz (a bare port means loopback; empty: off)"},
	{"metrics.pprof", "also serve Go's profiles at /debug/pprof/ on metrics.listen (for debugging)"},
	modelKeys[0], modelKeys[1], modelKeys[2],
}

// mapKeys are the keys holding string maps.
var mapKeys = []string{"agent.env", "task.env_vars", "models"}

// EnvName is the environment variable for a scalar key: AIMI_ + the key
// upper-cased with dots as underscores (sandbox.memory -> AIMI_SANDBOX_MEMORY,
// the name the shell tools used).
func EnvName(k string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
}

// FlagName is the flag for a scalar key: sandbox.memory -> sandbox-memory.
func FlagName(k string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(k)
}

// AddFlags registers one string flag per scalar key (FlagName), with no
// default so that only flags the user sets override the other layers.
func AddFlags(fs *pflag.FlagSet) {
	for _, k := range scalarKeys {
		fs.String(FlagName(k.name), "", k.help+" (config "+k.name+")")
	}
}

func known(k string) bool {
	for _, s := range scalarKeys {
		if s.name == k {
			return true
		}
	}
	if k == VariantsKey {
		return true
	}
	for _, l := range listKeys {
		if k == l {
			return true
		}
	}
	for _, m := range mapKeys {
		if k == m || strings.HasPrefix(k, m+".") {
			return true
		}
	}
	return false
}
