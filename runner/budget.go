package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// budgetWait bounds how long one story boundary waits for a daemon that
// does not answer (restarting) before the run goes on without its answer.
const budgetWait = 30 * time.Second

// budgetGate asks the daemon, before each story, whether the swarm's
// budgets (swarm.budget, agent.story_budget) let the container begin it
// (contract.BudgetPath on the container's channel to the daemon, as
// permission requests go). Once told to stop it begins nothing more: the
// stories in flight finish, and the run ends stopped with the daemon's
// BUDGET_EXCEEDED message among the completion's errors.
type budgetGate struct {
	ask      func(ctx context.Context, req contract.BudgetRequest) (contract.BudgetAnswer, bool, error)
	started  map[string]time.Time
	finished []contract.BudgetStory
	stop     string // the daemon's message, once it said stop
	off      bool   // no budgets here (no channel, or the daemon keeps none)
	wait     time.Duration
	retry    time.Duration
}

// newBudgetGate reaches the daemon: on the container's own budget socket,
// or else on the daemon's git service when that is the run's repository.
// A remote origin is never asked (the question is the daemon's, and the
// origin's token is not for it); without either channel no budgets hold.
func (r *run) newBudgetGate() *budgetGate {
	g := &budgetGate{started: map[string]time.Time{}, wait: budgetWait, retry: 2 * time.Second}
	ch, target, err := r.budgetChannel()
	if err != nil {
		r.log.Debug("no budgets for this run", "err", err)
		g.off = true
		return g
	}
	g.ask = func(ctx context.Context, req contract.BudgetRequest) (contract.BudgetAnswer, bool, error) {
		return askBudget(ctx, ch, target, req)
	}
	return g
}

// budgetChannel is the channel and URL of the budget question.
func (r *run) budgetChannel() (*askChannel, string, error) {
	if r.cfg.BudgetURL != "" {
		ch, err := openAskChannel(r.cfg.BudgetURL, "", "", "", false, r.cfg.Dial, r.log)
		return ch, r.cfg.BudgetURL, err
	}
	if !r.cfg.DaemonGit {
		return nil, "", errors.New("no channel to the daemon's budgets: no budget socket, and the repository is not the daemon's git service")
	}
	ch, err := newAskChannel(r.req.RepoURL, r.cfg.GitToken, r.cfg.CAFile, r.cfg.Dial, r.log)
	if err != nil {
		return nil, "", err
	}
	u, _ := url.Parse(ch.url)
	u.Path = contract.BudgetPath
	return ch, u.String(), nil
}

// askBudget sends one question. retry is true for failures that may pass
// (the daemon away or busy); other failures mean no budgets are kept there.
func askBudget(ctx context.Context, ch *askChannel, target string, q contract.BudgetRequest) (contract.BudgetAnswer, bool, error) {
	var ans contract.BudgetAnswer
	body, err := json.Marshal(q)
	if err != nil {
		return ans, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return ans, false, err
	}
	if ch.auth != "" {
		req.Header.Set("Authorization", ch.auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ch.client.Do(req)
	if err != nil {
		return ans, ctx.Err() == nil, fmt.Errorf("ask the daemon about the budget: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(msg, &ans); err != nil || (ans.State != contract.BudgetGo && ans.State != contract.BudgetStop) {
			return ans, false, fmt.Errorf("the daemon's answer is not a budget answer: %q", oneLine(string(msg), 200))
		}
		return ans, false, nil
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented:
		return ans, true, fmt.Errorf("the daemon answered HTTP %d: %s", resp.StatusCode, oneLine(string(msg), 200))
	}
	return ans, false, fmt.Errorf("no budgets kept (HTTP %d): %s", resp.StatusCode, oneLine(string(msg), 200))
}

// budgetAllows reports whether story id may begin, asking the daemon; it
// notes when the story began for the daemon's count of its spend.
func (r *run) budgetAllows(ctx context.Context, sc *sched, id string) bool {
	if sc.gate == nil {
		sc.gate = r.newBudgetGate()
	}
	g := sc.gate
	if g.stop != "" {
		return false
	}
	if !g.off {
		g.check(ctx, r)
	}
	if g.stop != "" {
		r.log.Warn("budget reached: no further story is begun; the stories in flight finish", "next", id, "running", len(sc.running))
		return false
	}
	g.started[id] = time.Now().UTC()
	return true
}

// check asks until the daemon answers, at most g.wait.
func (g *budgetGate) check(ctx context.Context, r *run) {
	q := contract.BudgetRequest{Stories: g.finished}
	if len(q.Stories) > contract.BudgetMaxStories {
		q.Stories = q.Stories[len(q.Stories)-contract.BudgetMaxStories:]
	}
	if q.Stories == nil {
		q.Stories = []contract.BudgetStory{}
	}
	deadline := time.Now().Add(g.wait)
	for {
		actx, cancel := context.WithTimeout(ctx, g.wait)
		ans, retry, err := g.ask(actx, q)
		cancel()
		switch {
		case err == nil && ans.State == contract.BudgetStop:
			g.stop = budgetMessage(ans.Message)
			return
		case err == nil:
			return
		case !retry:
			r.log.Debug("the daemon keeps no budgets for this run", "err", err)
			g.off = true
			return
		case time.Now().After(deadline) || ctx.Err() != nil:
			r.log.Warn("the daemon did not answer the budget question; the story begins", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.retry):
		}
	}
}

// budgetMessage is the daemon's stop message as the completion carries it:
// one line, bounded, headed by the code.
func budgetMessage(m string) string {
	m = oneLine(strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, m), 480)
	if !strings.HasPrefix(m, acpmsg.CodeBudgetExceeded+":") {
		m = acpmsg.CodeBudgetExceeded + ": " + m
	}
	return m
}

// budgetEnded notes when a story of this run ended.
func (r *run) budgetEnded(sc *sched, id string) {
	g := sc.gate
	if g == nil {
		return
	}
	if start, ok := g.started[id]; ok {
		g.finished = append(g.finished, contract.BudgetStory{ID: id, Start: start.Format(time.RFC3339Nano), End: time.Now().UTC().Format(time.RFC3339Nano)})
		delete(g.started, id)
	}
}

// budgetStopped reports whether the budget ended the run; it puts the
// daemon's message into the completion's errors.
func (r *run) budgetStopped(sc *sched) bool {
	if sc.gate == nil || sc.gate.stop == "" {
		return false
	}
	r.errs = append(r.errs, sc.gate.stop)
	return true
}
