package configs

import (
	"path/filepath"
	"strings"
	"testing"
)

// Budgets: a number 0 or more; anything else stops the load naming the
// key. git.mode remote takes budgets too (the runners ask on their budget
// sockets); only Swarm mode without git.address, where there is none, warns.
func TestBudgetsAreAmounts(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, ".aimi", "config.yaml"), "swarm:\n  budget: 12.5\nagent:\n  story_budget: 0.75\n")
	c, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Swarm.Budget != 12.5 || c.Agent.StoryBudget != 0.75 {
		t.Fatalf("budgets %v %v, want 12.5 0.75", c.Swarm.Budget, c.Agent.StoryBudget)
	}
	d, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env()})
	if err != nil || d.Swarm.Budget != 0 || d.Agent.StoryBudget != 0 || d.Swarm.BudgetGrace != 0.1 {
		t.Fatalf("defaults: %v %v grace %v %v, want no budgets and a grace of 10%%", d.Swarm.Budget, d.Agent.StoryBudget, d.Swarm.BudgetGrace, err)
	}
	if g, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env("AIMI_SWARM_BUDGET_GRACE", "2.5%")}); err != nil || g.Swarm.BudgetGrace != 0.025 {
		t.Fatalf("grace 2.5%%: %v %v", g.Swarm.BudgetGrace, err)
	}
	r, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env("AIMI_GIT_MODE", "remote")})
	if err != nil || r.Swarm.Budget != 12.5 || len(r.Warnings) != 0 {
		t.Fatalf("remote mode: %v %v %q, want the budget without warnings", r.Swarm.Budget, err, r.Warnings)
	}
	w, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env("AIMI_GIT_MODE", "remote", "AIMI_ENGINE_BACKEND", "swarm")})
	if err != nil || !strings.Contains(strings.Join(w.Warnings, "\n"), "budgets are not enforced") {
		t.Fatalf("remote Swarm mode without git.address: %v %q, want a warning", err, w.Warnings)
	}
	for _, tc := range []struct {
		name, file string
		env        []string
		key        string
	}{
		{"negative swarm budget", "swarm:\n  budget: -1\n", nil, "swarm.budget"},
		{"swarm budget not a number", "swarm:\n  budget: ten\n", nil, "swarm.budget"},
		{"swarm budget a list", "swarm:\n  budget: [1, 2]\n", nil, "swarm.budget"},
		{"story budget from the environment", "", []string{"AIMI_AGENT_STORY_BUDGET", "NaN"}, "agent.story_budget"},
		{"negative story budget", "agent:\n  story_budget: -0.5\n", nil, "agent.story_budget"},
		{"story budget infinite", "agent:\n  story_budget: .inf\n", nil, "agent.story_budget"},
		{"grace without its sign", "swarm:\n  budget_grace: 0.1\n", nil, "swarm.budget_grace"},
		{"negative grace", "", []string{"AIMI_SWARM_BUDGET_GRACE", "-5%"}, "swarm.budget_grace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := t.TempDir()
			if tc.file != "" {
				writeFile(t, filepath.Join(repo, ".aimi", "config.yaml"), tc.file)
			}
			_, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env(tc.env...)})
			if err == nil || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("error %v, want one naming %s", err, tc.key)
			}
		})
	}
}
