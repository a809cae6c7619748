package configs

import (
	"math"
	"strconv"
)

// budgets reads swarm.budget and agent.story_budget: amounts, 0 or more,
// in the currency of models.<provider>.prices. The runners ask the daemon
// on their own budget sockets in either git mode; Swarm-mode sandboxes
// without git.address have none, and in remote mode no other channel.
func (r *reader) budgets(c *Config) {
	c.Swarm.Budget = r.amount("swarm.budget")
	c.Agent.StoryBudget = r.amount("agent.story_budget")
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
