package aimid

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aimi-tools/swarm/budget"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/usage/ledger"
)

// openBudgets makes the keeper of swarm.budget and agent.story_budget: the
// model gateway's meter tells it the cost of every call that began after
// it (earlier ones it reads back from the journals), and the runners ask it
// at each story boundary on their own budget sockets (sandboxes without a
// network, either git mode) or else through the daemon's git service. The
// model gateway asks it before every call (the budgets' hard cap).
func openBudgets(global *configs.Config, base configs.LoadOptions, git *gitserve.Service, models orchestrator.ModelAccess, meter *ledger.Ledger, log *slog.Logger) contract.Budgets {
	k := budget.New(budget.Config{Limits: budget.ReadLimits(budgetLayers(global, base, configs.Load), log), Seed: budget.JournaledSpend, Logger: log})
	meter.OnSpend(k.Add)
	if ma, ok := models.(modelAdapter); ok && ma.Service != nil {
		ma.Service.SetBudget(k)
	}
	var b contract.Budgets = k
	if d, err := time.ParseDuration(os.Getenv(EnvBudgetDelay)); err == nil && d > 0 {
		log.Warn("budget answers are delayed (a test hook)", "env", EnvBudgetDelay, "delay", d)
		b = slowBudgets{Budgets: k, delay: d}
	}
	if git != nil {
		git.SetBudgets(b)
	}
	return b
}

// EnvBudgetDelay, a duration, delays every budget answer: a test hook
// that stands in for a daemon slow to answer (loaded, or just restarted).
const EnvBudgetDelay = "AIMI_TEST_BUDGET_DELAY"

// slowBudgets answers after delay, or not at all when the question is
// given up meanwhile.
type slowBudgets struct {
	contract.Budgets
	delay time.Duration
}

func (s slowBudgets) ServeBudget(w http.ResponseWriter, r *http.Request, from contract.Caller) {
	// The question is read first: the socket bounds the time a request
	// may take to arrive, and the delay is the daemon's, not the sender's.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, contract.BudgetMaxBody))
	if err != nil {
		http.Error(w, "aimi: budget question refused: not a budget request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		s.Budgets.ServeBudget(w, r, from)
	case <-r.Context().Done():
	}
}

// budgetLayers are the configuration layers of base as the budgets read
// them (budget.ReadLimits); load is configs.Load.
func budgetLayers(global *configs.Config, base configs.LoadOptions, load func(configs.LoadOptions) (*configs.Config, error)) budget.Layers {
	limits := func(c *configs.Config) budget.Limits {
		return budget.Limits{Swarm: c.Swarm.Budget, Story: c.Agent.StoryBudget, Grace: c.Swarm.BudgetGrace}
	}
	at := func(repoPath string) configs.LoadOptions {
		opts := base
		opts.RepoPath = repoPath
		return opts
	}
	return budget.Layers{
		Files: func(repoPath string) []string { return at(repoPath).Files() },
		Read: func(repoPath string) (budget.Limits, error) {
			c, err := load(at(repoPath))
			if err != nil {
				return budget.Limits{}, err
			}
			return limits(c), nil
		},
		Fallback: limits(global),
	}
}
