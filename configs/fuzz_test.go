package configs

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// FuzzRepoConfig loads arbitrary bytes as a repository's .aimi/config.yaml:
// that file comes with whatever repository the user cloned, so it is
// untrusted input. Load must never panic, and whatever it accepts must hold
// the invariants the daemon relies on.
func FuzzRepoConfig(f *testing.F) {
	f.Add([]byte("sandbox:\n  image: x:1\n  memory: 1g\n  swap: 2g\nswarm:\n  max_containers: 8\n"))
	f.Add([]byte("agent:\n  env:\n    K: ${HOME}\ntask:\n  env_vars:\n    A: b\n"))
	f.Add([]byte("sandbox: [1, 2]\n"))
	f.Add([]byte("sandbox:\n  cpus: .5e1\n  pids: 0x20\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("swarm:\n  budget: 5\n  budget_grace: 12.5%\n"))
	f.Add([]byte("egress:\n  ask: true\n  ask_wait: 30s\n  allow: [a.example]\n"))
	f.Add([]byte("egress:\n  ask: [1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		repo := t.TempDir()
		if err := os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, RepoConfigPath), data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The daemon reads egress.ask of the repository's file as each
		// container starts: a bad value is an error, never a panic.
		_, _ = RepoEgressAsk(repo)
		c, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env("HOME", "/home/u")})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		switch {
		case c.Sandbox.Image == "":
			t.Fatal("accepted an empty image")
		case c.Sandbox.CPUs <= 0, c.Sandbox.MemoryBytes <= 0, c.Sandbox.Pids < 16:
			t.Fatalf("accepted bad limits %+v", c.Sandbox)
		case c.Sandbox.MemorySwapBytes != -1 && c.Sandbox.MemorySwapBytes < c.Sandbox.MemoryBytes:
			t.Fatalf("accepted swap below memory %+v", c.Sandbox)
		case c.Swarm.MaxContainers < 1 || c.Swarm.MaxContainers > 256:
			t.Fatalf("accepted max_containers %d", c.Swarm.MaxContainers)
		case c.Swarm.Timeout <= 0 || c.Swarm.StopGrace <= 0 || c.Egress.AskWait <= 0:
			t.Fatalf("accepted durations %+v", c.Swarm)
		case !(c.Swarm.BudgetGrace >= 0) || math.IsInf(c.Swarm.BudgetGrace, 0) || !(c.Swarm.Budget >= 0) || !(c.Agent.StoryBudget >= 0):
			t.Fatalf("accepted budgets %v %v grace %v", c.Swarm.Budget, c.Agent.StoryBudget, c.Swarm.BudgetGrace)
		}
		for k := range c.Task.EnvVars {
			if !contract.ValidEnvKey(k) {
				t.Fatalf("accepted env key %q", k)
			}
		}
		for k := range c.Agent.Env {
			if !contract.ValidEnvKey(k) {
				t.Fatalf("accepted agent env key %q", k)
			}
		}
	})
}
