package configs

import (
	"math"
	"strconv"
)

// budgets reads swarm.budget and agent.story_budget: amounts, 0 or more,
// in the currency of models.<provider>.prices. They need the local git
// service, the runners' channel to the daemon.
func (r *reader) budgets(c *Config) {
	c.Swarm.Budget = r.amount("swarm.budget")
	c.Agent.StoryBudget = r.amount("agent.story_budget")
	if (c.Swarm.Budget > 0 || c.Agent.StoryBudget > 0) && c.Git.Mode == GitRemote {
		k := "swarm.budget"
		if c.Swarm.Budget == 0 {
			k = "agent.story_budget"
		}
		r.bad(k, r.str(k), "is set but git.mode is remote",
			"budgets need git.mode local or auto: the runners ask the daemon at each story boundary through its local git service; or set the budget to 0")
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
