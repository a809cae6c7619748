package configs

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// PrepareStart applies the repository's .aimi/config.yaml to one start.
//
// Per-repo values reach a swarm through the StartRequest: sandbox.image,
// swarm.max_containers, swarm.attempts, swarm.attempts_stop and git.mode (flags of `aimi swarm start` still win).
// The other keys (limits, timeouts, agent, env) are the Manager's and apply
// daemon-wide; a repo file that sets them differently gets a warning in the
// daemon log naming them, and a restart of aimid with them in the user
// config is the way to change them. A bad repo config refuses the start
// with every problem (HTTP 400, field "config").
//
// warm, when set, hears the repository's config at each start (its
// sandbox.warm_pool).
func PrepareStart(global *Config, base LoadOptions, gitService bool, log *slog.Logger, warm func(*api.StartRequest, *Config)) func(context.Context, *api.StartRequest) error {
	return func(ctx context.Context, req *api.StartRequest) error {
		opts := base
		opts.RepoPath = req.RepoPath
		rc, err := Load(opts)
		if err != nil {
			return &api.FieldError{Field: "config", Reason: err.Error()}
		}
		if req.Image == "" {
			req.Image = rc.Sandbox.Image
		}
		if req.Max == 0 {
			req.Max = rc.Swarm.MaxContainers
		}
		if req.Attempts == 0 {
			req.Attempts = rc.Swarm.Attempts
		}
		if req.AttemptsStop == "" {
			req.AttemptsStop = rc.Swarm.AttemptsStop
		}
		if !req.Local && gitService {
			switch rc.Git.Mode {
			case GitLocal:
				req.Local = true
			case GitAuto:
				req.Local = !hasOrigin(ctx, req.RepoPath)
			}
		}
		if warm != nil {
			warm(req, rc)
		}
		if ignored := daemonWideDiffs(global, rc); len(ignored) > 0 {
			log.Warn("repo config keys apply daemon-wide only; put them in the user config and restart aimid",
				"repo", req.RepoPath, "keys", ignored)
		}
		return nil
	}
}

// hasOrigin reports whether the repo has an origin remote (git.mode auto:
// local without one).
func hasOrigin(ctx context.Context, repo string) bool {
	_, err := gitcmd.Git{}.Run(ctx, repo, "remote", "get-url", "origin")
	return err == nil
}

// daemonWideDiffs names the keys whose repo-layer value differs from the
// daemon's and cannot apply per swarm. Values are not named: agent.env holds
// secrets.
func daemonWideDiffs(g, r *Config) []string {
	var keys []string
	add := func(differs bool, key string) {
		if differs {
			keys = append(keys, key)
		}
	}
	add(g.Sandbox.CPUs != r.Sandbox.CPUs, "sandbox.cpus")
	add(g.Sandbox.MemoryBytes != r.Sandbox.MemoryBytes, "sandbox.memory")
	add(g.Sandbox.MemorySwapBytes != r.Sandbox.MemorySwapBytes, "sandbox.swap")
	add(g.Sandbox.DiskBytes != r.Sandbox.DiskBytes, "sandbox.disk")
	add(g.Sandbox.Pids != r.Sandbox.Pids, "sandbox.pids")
	add(g.Sandbox.Runtime != r.Sandbox.Runtime, "sandbox.runtime")
	add(g.Sandbox.RequireRuntime != r.Sandbox.RequireRuntime, "sandbox.require_runtime")
	add(g.Sandbox.ReadOnlyRoot != r.Sandbox.ReadOnlyRoot, "sandbox.read_only_root")
	add(g.Swarm.Timeout != r.Swarm.Timeout, "swarm.timeout")
	add(g.Swarm.StopGrace != r.Swarm.StopGrace, "swarm.stop_grace")
	add(g.Swarm.ScoreCommand != r.Swarm.ScoreCommand, "swarm.score_command")
	add(!slices.EqualFunc(g.Agent.Variants, r.Agent.Variants, sameVariant), "agent.variants")
	add(g.Agent.Kind != r.Agent.Kind, "agent.kind")
	add(g.Agent.Command != r.Agent.Command, "agent.command")
	add(g.Agent.VerifyCommand != r.Agent.VerifyCommand, "agent.verify_command")
	add(g.Agent.PermissionPolicy != r.Agent.PermissionPolicy, "agent.permission_policy")
	add(g.Agent.HandshakeTimeout != r.Agent.HandshakeTimeout, "agent.handshake_timeout")
	add(g.Agent.StallTimeout != r.Agent.StallTimeout, "agent.stall_timeout")
	add(g.Agent.LoopLimit != r.Agent.LoopLimit, "agent.loop_limit")
	add(g.Agent.LimitMaxWait != r.Agent.LimitMaxWait, "agent.limit_max_wait")
	add(g.Agent.LimitRetries != r.Agent.LimitRetries, "agent.limit_retries")
	add(g.Agent.AskTimeout != r.Agent.AskTimeout, "agent.ask_timeout")
	add(g.Agent.AskFallback != r.Agent.AskFallback, "agent.ask_fallback")
	add(!maps.Equal(g.Agent.Env, r.Agent.Env), "agent.env")
	add(!maps.Equal(g.Task.EnvVars, r.Task.EnvVars), "task.env_vars")
	add(g.Publish != r.Publish, "publish")
	add(g.Egress.AskWait != r.Egress.AskWait, EgressAskWaitKey)
	slices.Sort(keys)
	return keys
}
