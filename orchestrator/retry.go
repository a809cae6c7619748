package orchestrator

import (
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/state"
)

// retryable reports whether `resume --retry-failed` reruns c: it failed,
// or it completed with stories failed (the message spec's completed:
// every story finished, some perhaps failed). The rerun starts from the
// branch's tip, so what passed stays and is not run again; the runner
// retries the failed stories and reopens those skipped behind them.
func (sw *swarm) retryable(c *ctr) bool {
	if land.IsLandRun(c.taskFile) {
		return false // a land's own run: the land that started it decides, and is over
	}
	e := sw.led.container(c.name)
	return e != nil && (e.Status == state.StatusFailed || e.CompletedWithFailures())
}

// summaryOf is the view's count of the containers by outcome.
func summaryOf(s *state.Swarm) *state.Summary {
	sum := state.Summarize(s)
	return &sum
}
