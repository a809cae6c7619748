package aimid

import (
	"testing"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
)

func TestOrchestratorConfigCarriesEveryKey(t *testing.T) {
	t.Parallel()
	c, err := configs.Load(configs.LoadOptions{UserConfigPath: "-", LookupEnv: func(k string) (string, bool) {
		v, ok := map[string]string{
			"AIMI_AGENT_KIND": "acp", "AIMI_AGENT_COMMAND": "claude-code-acp", "AIMI_AGENT_VERIFY_COMMAND": "make test",
			"AIMI_SANDBOX_RUNTIME": "sysbox-runc", "AIMI_SANDBOX_REQUIRE_RUNTIME": "true", "AIMI_SANDBOX_DISK": "10g",
		}[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.Agent.Env = configs.Secrets{"ANTHROPIC_API_KEY": "sk-secret", "MY_TOKEN": "tok-secret"}
	c.Task.EnvVars = map[string]string{"NODE_ENV": "test"}
	oc := orchestratorConfig(c, nil, nil)
	if oc.Git != nil {
		t.Error("remote mode must leave Git a nil interface")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", oc.Image, "aimi-sandbox:latest"},
		{"max", oc.MaxContainers, 4},
		{"cpus", oc.CPUs, 2.0},
		{"memory", oc.MemoryBytes, int64(4 << 30)},
		{"swap is memory+swap total", oc.MemorySwapBytes, int64(8 << 30)},
		{"pids", oc.PidsLimit, int64(512)},
		{"disk", oc.DiskBytes, int64(10 << 30)},
		{"timeout", oc.Timeout, 2 * time.Hour},
		{"grace", oc.StopGrace, 30 * time.Second},
		{"runtime", oc.Runtime, "sysbox-runc"},
		{"require runtime", oc.RequireRuntime, true},
		{"task env", oc.EnvVars["NODE_ENV"], "test"},
		{"agent kind", oc.RunnerEnv[contract.EnvAgent], "acp"},
		{"agent command", oc.RunnerEnv[contract.EnvAgentCommand], "claude-code-acp"},
		{"verify", oc.RunnerEnv[contract.EnvVerifyCommand], "make test"},
		{"policy", oc.RunnerEnv[contract.EnvPermissionPolicy], "allow"},
		{"handshake timeout", oc.RunnerEnv[contract.EnvHandshakeTimeout], "2m0s"},
		{"stall timeout", oc.RunnerEnv[contract.EnvStallTimeout], "15m0s"},
		{"loop limit", oc.RunnerEnv[contract.EnvLoopLimit], "8"},
		{"agent env secret goes to the runner env", oc.RunnerEnv["MY_TOKEN"], "tok-secret"},
		{"a model key stays with the model gateway", oc.RunnerEnv["ANTHROPIC_API_KEY"], ""},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}
