package runner

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// budgetAhead is the first budget question, asked once while the
// workspace is filled: it depends on nothing the workspace holds (no
// story has begun), and the daemon's answer, a round trip that every
// sandbox of a start asks at once, then no longer follows the workspace
// on the first story's way to its start. Budgets still fail closed: the
// first story waits for this answer, and if it went unanswered asks again
// as any story does (budgetGate.check).
type budgetAhead struct {
	gate  *budgetGate
	asked time.Time
	done  chan struct{}
	err   error // set before done closes: no answer
}

// askBudgetAhead asks the first budget question on its own goroutine; it
// ends with ctx.
func (r *run) askBudgetAhead(ctx context.Context) *budgetAhead {
	g := r.newBudgetGate()
	a := &budgetAhead{gate: g, asked: time.Now(), done: make(chan struct{})}
	if g.off {
		close(a.done)
		return a
	}
	go func() {
		defer close(a.done)
		actx, cancel := context.WithTimeout(ctx, g.attempt)
		defer cancel()
		ans, err := g.ask(actx, g.question())
		switch {
		case err != nil:
			a.err = err
		case ans.State == contract.BudgetStop:
			g.stop = budgetMessage(ans.Message)
		}
	}()
	return a
}

// take waits for the question asked ahead and hands its gate to the first
// story, next: prior is why it went unanswered (nil: answered, or ctx
// ended), said whether next's status already says it waits (after
// g.note without an answer, as budgetGate.check says it).
func (a *budgetAhead) take(ctx context.Context, r *run, next string) (g *budgetGate, prior error, said bool) {
	g = a.gate
	t := time.NewTimer(time.Until(a.asked.Add(g.note)))
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
		r.noteBudgetWait(next, "no answer yet")
		said = true
		<-a.done // its ask ends with ctx, or after g.attempt
	case <-ctx.Done():
		<-a.done
	}
	if ctx.Err() != nil {
		return g, nil, said // stopped: its unanswered question is no news for next's status
	}
	return g, a.err, said
}
