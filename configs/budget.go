package configs

import (
	"math"
	"strconv"
	"strings"
)

// budgets reads swarm.budget and agent.story_budget: amounts, 0 or more,
// in the currency of models.<provider>.prices. The runners ask the daemon
// on their own budget sockets in either git mode; Swarm-mode sandboxes
// without git.address have none, and in remote mode no other channel.
func (r *reader) budgets(c *Config) {
	c.Swarm.Budget = r.amount("swarm.budget")
	c.Agent.StoryBudget = r.amount("agent.story_budget")
	c.Swarm.BudgetGrace = r.percent("swarm.budget_grace")
	if (c.Swarm.Budget > 0 || c.Agent.StoryBudget > 0) && c.Git.Mode == GitRemote && c.Engine.Backend == BackendSwarm && c.Git.Address == "" {
		c.Warnings = append(c.Warnings, "a budget is set, but with git.mode remote and engine.backend swarm without git.address the containers have no channel to the daemon: budgets are not enforced; set git.address")
	}
}

// amount is key k as a finite number, 0 or more.
func (r *reader) amount(k string) float64 {
	s := r.str(k)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		r.bad(k, s, "is not an amount", "use a number, 0 or more, in the currency of models.<provider>.prices (e.g. 25 or 2.50; 0: no budget)")
		return 0
	}
	return f
}

// percent is key k as a percentage, 0 or more, written with its sign
// ("10%"), as a fraction.
func (r *reader) percent(k string) float64 {
	s := r.str(k)
	num, ok := strings.CutSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		r.bad(k, s, "is not a percentage", "use a number, 0 or more, followed by % (e.g. 10%)")
		return 0
	}
	return f / 100
}
