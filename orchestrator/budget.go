package orchestrator

import (
	"context"
	"strings"
	"time"

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

// reopenStopped marks the state file's entries of the stopped containers
// about to run again pending: the rerun's new Recorder would otherwise
// take their stopped, which it did not write, for another tool's stop
// request (state.ForeignStop) and stop the rerun at once. Runs while the
// ledger is closed (rebuild's fix).
func (sw *swarm) reopenStopped(ctx context.Context, rerun []*ctr) error {
	names := map[string]bool{}
	for _, c := range rerun {
		names[c.name] = true
	}
	return sw.store.Update(ctx, func(s *state.Swarm) error {
		for _, fc := range s.Containers {
			if fc != nil && names[fc.ContainerName] && fc.Status == state.StatusStopped {
				fc.Status = state.StatusPending
				fc.UpdatedAt = time.Now().UTC()
			}
		}
		return nil
	})
}
