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
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// budgetAttempt bounds one budget question: a daemon that takes longer
// (restarting, or loaded) is asked again, never passed over. It is well
// above the daemon's own bound on reading the question, so a daemon that
// answers slowly is still heard.
const budgetAttempt = 2 * time.Minute

// budgetWaitNote is how long a story waits for the budget answer before
// the wait is said in its status.
const budgetWaitNote = 10 * time.Second

// budgetGate asks the daemon, before each story, whether the swarm's
// budgets (swarm.budget, agent.story_budget) let the container begin it
// (contract.BudgetPath on the container's channel to the daemon, as
// permission requests go). Once told to stop it begins nothing more: the
// stories in flight finish, and the run ends stopped with the daemon's
// BUDGET_EXCEEDED message among the completion's errors. Budgets fail
// closed: a question without an answer (the daemon away, slow, or its
// socket held by the sandbox's own processes) is asked again until it is
// answered, and the story waits, saying so in its status.
type budgetGate struct {
	ask      func(ctx context.Context, req contract.BudgetRequest) (contract.BudgetAnswer, error)
	started  map[string]time.Time
	finished []contract.BudgetStory
	stop     string // the daemon's message, once it said stop
	off      bool   // no channel to the daemon: no budgets can hold
	attempt  time.Duration
	retry    time.Duration
	note     time.Duration
}

// newBudgetGate reaches the daemon: on the container's own budget socket,
// or else on the daemon's git service when that is the run's repository.
// A remote origin is never asked (the question is the daemon's, and the
// origin's token is not for it); without either channel no budgets hold.
func (r *run) newBudgetGate() *budgetGate {
	g := &budgetGate{started: map[string]time.Time{}, attempt: budgetAttempt, retry: 2 * time.Second, note: budgetWaitNote}
	ch, target, err := r.budgetChannel()
	if err != nil {
		r.log.Debug("no budgets for this run", "err", err)
		g.off = true
		return g
	}
	g.ask = func(ctx context.Context, req contract.BudgetRequest) (contract.BudgetAnswer, error) {
		return askBudget(ctx, ch, target, req)
	}
	return g
}

// budgetChannel is the channel and URL of the budget question.
func (r *run) budgetChannel() (*askChannel, string, error) {
	if r.cfg.BudgetURL != "" {
		ch, err := openAskChannel(r.cfg.BudgetURL, "", "", "", false, r.log)
		return ch, r.cfg.BudgetURL, err
	}
	if !r.cfg.DaemonGit {
		return nil, "", errors.New("no channel to the daemon's budgets: no budget socket, and the repository is not the daemon's git service")
	}
	ch, err := newAskChannel(r.req.RepoURL, r.cfg.GitToken, r.cfg.CAFile, r.log)
	if err != nil {
		return nil, "", err
	}
	u, _ := url.Parse(ch.url)
	u.Path = contract.BudgetPath
	return ch, u.String(), nil
}

// askBudget sends one question. Any failure is for the caller to ask
// again: only an answer of the daemon's says whether a story may begin.
func askBudget(ctx context.Context, ch *askChannel, target string, q contract.BudgetRequest) (contract.BudgetAnswer, error) {
	var ans contract.BudgetAnswer
	body, err := json.Marshal(q)
	if err != nil {
		return ans, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return ans, err
	}
	if ch.auth != "" {
		req.Header.Set("Authorization", ch.auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ch.client.Do(req)
	if err != nil {
		return ans, fmt.Errorf("ask the daemon about the budget: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("the daemon answered the budget question with HTTP %d: %s", resp.StatusCode, oneLine(string(msg), 200))
	}
	if err := json.Unmarshal(msg, &ans); err != nil || (ans.State != contract.BudgetGo && ans.State != contract.BudgetStop) {
		return ans, fmt.Errorf("the daemon's answer is not a budget answer: %q", oneLine(string(msg), 200))
	}
	return ans, nil
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
		g.check(ctx, r, id)
	}
	if ctx.Err() != nil {
		return false // stopped while it waited: begin nothing
	}
	if g.stop != "" {
		r.log.Warn("budget reached: no further story is begun; the stories in flight finish", "next", id, "running", len(sc.running))
		return false
	}
	g.started[id] = time.Now().UTC()
	return true
}

// check asks until the daemon answers (or the run is stopped). A wait
// longer than g.note is said in next's status, once.
func (g *budgetGate) check(ctx context.Context, r *run, next string) {
	q := contract.BudgetRequest{Stories: g.finished}
	if len(q.Stories) > contract.BudgetMaxStories {
		q.Stories = q.Stories[len(q.Stories)-contract.BudgetMaxStories:]
	}
	if q.Stories == nil {
		q.Stories = []contract.BudgetStory{}
	}
	start := time.Now()
	var noted sync.Once
	say := func(why string) {
		noted.Do(func() {
			r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: next, Status: acpmsg.StoryPending,
				Output: acpmsg.TruncateOutput(fmt.Sprintf("%s waits for the daemon's answer to the budget question (swarm.budget, agent.story_budget) before it begins: %s; asking again until it answers.", next, why))})
		})
	}
	slow := time.AfterFunc(g.note, func() { say("no answer yet") })
	defer slow.Stop()
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, g.attempt)
		ans, err := g.ask(actx, q)
		cancel()
		switch {
		case err == nil && ans.State == contract.BudgetStop:
			g.stop = budgetMessage(ans.Message)
			return
		case err == nil:
			if attempt > 1 {
				r.log.Info("the daemon answered the budget question", "next", next, "attempts", attempt, "waited", time.Since(start).Round(time.Second))
			}
			return
		case ctx.Err() != nil:
			return
		}
		say(oneLine(err.Error(), 300))
		if time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			r.log.Warn("the daemon did not answer the budget question; the story waits and asks again", "next", next, "attempt", attempt, "waited", time.Since(start).Round(time.Second), "err", err)
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
