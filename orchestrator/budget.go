package orchestrator

import (
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/state"
)

// noteBudget marks a container whose run a budget ended (a completion
// error "BUDGET_EXCEEDED: ..."): it stopped at a story boundary with
// stories left, and `aimi swarm resume` runs it again. Caller holds sw.mu.
func (c *ctr) noteBudget(text string) {
	if strings.HasPrefix(text, acpmsg.CodeBudgetExceeded+":") {
		c.overBudget = true
	}
}

// overBudget reports whether resume runs c again: it stopped for a budget
// (the budget is read again at its next story boundary, so one not raised
// stops it again before it begins anything).
func (sw *swarm) overBudget(st state.ContainerStatus, c *ctr) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return st == state.StatusStopped && c.overBudget
}
