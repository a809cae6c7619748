package aimid

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/publish"
)

// orchestratorConfig maps the validated config onto the Manager's settings.
// The runner inside each container reads its agent settings from the
// AIMI_AGENT* variables (cmd/acp-runner documents them); agent.env is added
// as is (secrets: the Manager never logs or journals RunnerEnv), but for
// the model keys: they stay in the daemon, with the model gateway.
func orchestratorConfig(c *configs.Config, git *gitserve.Service, log *slog.Logger) orchestrator.Config {
	_, runnerEnv, _ := gateway.Split(c.Agent.Env, c.Models)
	runnerEnv[contract.EnvAgent] = c.Agent.Kind
	runnerEnv[contract.EnvPermissionPolicy] = c.Agent.PermissionPolicy
	if c.Agent.HandshakeTimeout > 0 {
		runnerEnv[contract.EnvHandshakeTimeout] = c.Agent.HandshakeTimeout.String()
	}
	if c.Agent.StallTimeout > 0 {
		runnerEnv[contract.EnvStallTimeout] = c.Agent.StallTimeout.String()
	}
	runnerEnv[contract.EnvLoopLimit] = strconv.Itoa(c.Agent.LoopLimit)
	runnerEnv[contract.EnvLimitRetries] = strconv.Itoa(c.Agent.LimitRetries)
	if c.Agent.Command != "" {
		runnerEnv[contract.EnvAgentCommand] = c.Agent.Command
	}
	if c.Agent.VerifyCommand != "" {
		runnerEnv[contract.EnvVerifyCommand] = c.Agent.VerifyCommand
	}
	oc := orchestrator.Config{
		Image:             c.Sandbox.Image,
		MaxContainers:     c.Swarm.MaxContainers,
		CPUs:              c.Sandbox.CPUs,
		MemoryBytes:       c.Sandbox.MemoryBytes,
		MemorySwapBytes:   c.Sandbox.MemorySwapBytes,
		PidsLimit:         c.Sandbox.Pids,
		DiskBytes:         c.Sandbox.DiskBytes,
		Timeout:           c.Swarm.Timeout,
		StopGrace:         c.Swarm.StopGrace,
		Runtime:           c.Sandbox.Runtime,
		RequireRuntime:    c.Sandbox.RequireRuntime,
		ReadOnlyRoot:      c.Sandbox.ReadOnlyRoot,
		EnvVars:           maps.Clone(c.Task.EnvVars),
		RunnerEnv:         runnerEnv,
		OriginCAFile:      c.Git.OriginCA,
		LandAuto:          c.Land.Auto,
		LandFixAttempts:   landFixAttempts(c.Land.FixAttempts),
		LandVerifyCommand: c.Land.VerifyCommand,
		LandHook:          landPause(log),
		ScoreCommand:      c.Swarm.ScoreCommand,
		PickPause:         os.Getenv(EnvPickPause),
		Variants:          agentVariants(c.Agent.Variants),
		Logger:            log,
		// A remote-mode land's one pull request: the token publish uses.
		LandPR: publish.Hosted{GitHub: publish.GitHub{
			API: c.Publish.GitHubAPI, Token: os.Getenv(cmp.Or(c.Publish.TokenEnv, publish.DefaultTokenEnv)),
		}},
	}
	if git != nil {
		// A nil *gitserve.Service must stay a nil interface: the Manager
		// tests Git == nil for remote-only mode.
		oc.Git = gitAdapter{git}
		oc.Publisher = publish.NewPublisher(git, publish.Options{
			Logger:    log,
			GitHubAPI: c.Publish.GitHubAPI,
			TokenEnv:  c.Publish.TokenEnv,
		})
	}
	return oc
}

var _ orchestrator.ContainerWork = gitserve.Keeper{}

// gitAdapter makes *gitserve.Service an orchestrator.GitAccess: the two
// packages each declare their Grant type (neither imports the other).
type gitAdapter struct{ *gitserve.Service }

func (g gitAdapter) Grant(ctx context.Context, cb contract.ContainerBranch, gateway string) (orchestrator.Grant, error) {
	gr, err := g.Service.Grant(ctx, cb, gateway)
	return orchestrator.Grant(gr), err
}

// modelAdapter makes *gateway.Service an orchestrator.ModelAccess.
type modelAdapter struct{ *gateway.Service }

var _ orchestrator.LimitHolder = modelAdapter{}

func (m modelAdapter) Grant(sb contract.Sandbox, gw string) (orchestrator.ModelGrant, error) {
	g, err := m.Service.Grant(sb, gw)
	return orchestrator.ModelGrant(g), err
}

// LimitWaits implements orchestrator.ModelWaits: the gateway's waits of
// swarmID's containers.
func (m modelAdapter) LimitWaits(swarmID string) map[string][]api.LimitWait {
	out := map[string][]api.LimitWait{}
	for _, w := range m.Service.Waits() {
		if w.Swarm == swarmID {
			out[w.Container] = append(out[w.Container], limitWaitView(w))
		}
	}
	return out
}

func limitWaitView(w gateway.Wait) api.LimitWait {
	v := api.LimitWait{Provider: w.Provider, Reason: w.Reason, Since: w.Since.UTC(), Calls: w.Calls, Text: w.String()}
	if !w.Until.IsZero() {
		u := w.Until.UTC()
		v.Until = &u
	}
	return v
}

// openModels starts the model gateway when agent.env holds a model key
// (nil otherwise). Its CA is the git service's: one file for the sandbox
// to trust.
func openModels(c *configs.Config, dataDir string, obs gateway.Observer, log *slog.Logger) (*gateway.Service, error) {
	keys, _, used := gateway.Split(c.Agent.Env, c.Models)
	if len(used) == 0 {
		return nil, nil
	}
	g, err := gateway.New(gateway.Options{
		DataDir: filepath.Join(dataDir, "gateway"), CADir: filepath.Join(dataDir, "git"),
		Providers: c.Models, Keys: keys, Logger: log, Observer: obs, Limits: gatewayLimits(c),
	})
	if err != nil {
		return nil, fmt.Errorf("start the model gateway: %w", err)
	}
	upstreams := map[string]string{}
	for _, p := range used {
		upstreams[p] = c.Models[p].URL.String()
	}
	log.Info("model gateway: keys stay in the daemon", "providers", used, "upstreams", upstreams)
	return g, nil
}

// gatewayLimits are the gateway's bounds of the config. A sandbox's own
// socket is bounded per sandbox (contract.ChannelConns), the listeners on
// a network's gateway per source address (MaxConnsPerPeer): neither is
// shared by all sandboxes, so neither is lifted.
func gatewayLimits(c *configs.Config) gateway.Limits {
	return gateway.Limits{LimitMaxWait: c.Agent.LimitMaxWait}
}

// landFixAttempts maps land.fix_attempts onto the Manager's setting, whose
// zero means the default (one): none is -1 there.
func landFixAttempts(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// agentVariants maps agent.variants onto the Manager's.
func agentVariants(vs []configs.Variant) []orchestrator.AgentVariant {
	var out []orchestrator.AgentVariant
	for _, v := range vs {
		out = append(out, orchestrator.AgentVariant{Name: v.Name, Command: v.Command, Env: maps.Clone(v.Env)})
	}
	return out
}

// EnvPickPause ("before" or "after") holds every attempt pick before its
// state write or after it until the daemon ends: a test hook that stands
// in for a daemon killed at either point.
const EnvPickPause = "AIMI_TEST_PICK_PAUSE"
