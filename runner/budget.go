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
	"github.com/aimi-tools/swarm/tasks"
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
	var prior error // the question asked ahead went unanswered
	asked, noted := false, false
	if sc.gate == nil {
		if r.ahead != nil {
			sc.gate, prior, noted = r.ahead.take(ctx, r, id)
			asked = prior == nil
		} else {
			sc.gate = r.newBudgetGate()
		}
	}
	g := sc.gate
	if g.stop != "" {
		return false
	}
	if !g.off && !asked {
		g.check(ctx, r, id, prior, noted)
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

// question is what the daemon is asked: the stories finished (the latest
// ones, within the bound) and those in flight.
func (g *budgetGate) question() contract.BudgetRequest {
	q := contract.BudgetRequest{Stories: g.finished}
	if len(q.Stories) > contract.BudgetMaxStories {
		q.Stories = q.Stories[len(q.Stories)-contract.BudgetMaxStories:]
	}
	if q.Stories == nil {
		q.Stories = []contract.BudgetStory{}
	}
	for id, start := range g.started {
		if len(q.Running) < contract.BudgetMaxStories {
			q.Running = append(q.Running, contract.BudgetStory{ID: id, Start: start.Format(time.RFC3339Nano)})
		}
	}
	return q
}

// check asks until the daemon answers (or the run is stopped). A wait
// longer than g.note, or a question that went unanswered (prior: the one
// asked ahead), is said in next's status, once (next is "" when no story
// waits to begin; said: it was said already).
func (g *budgetGate) check(ctx context.Context, r *run, next string, prior error, said bool) {
	q := g.question()
	start := time.Now()
	var noted sync.Once
	say := func(why string) {
		if next == "" || said {
			return
		}
		noted.Do(func() { r.noteBudgetWait(next, why) })
	}
	if prior != nil {
		say(oneLine(prior.Error(), 300))
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

// noteBudgetWait says in next's status that it waits for the daemon's
// answer to the budget question, and why.
func (r *run) noteBudgetWait(next, why string) {
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: next, Status: r.storyStatus(next),
		Output: acpmsg.TruncateOutput(fmt.Sprintf("%s waits for the daemon's answer to the budget question (swarm.budget, agent.story_budget) before it begins: %s; asking again until it answers.", next, why))})
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

// budgetCut asks the daemon, when a story ended failed, whether the budget
// ended it (the model gateway refuses the calls of a container past its
// budget's grace, and an agent so refused ends its turn in error). If the
// budget is reached the story is not failed but cut off: finish commits
// its work so far and puts it back to be done, as after a stop, and the
// run begins nothing more.
func (r *run) budgetCut(ctx context.Context, sc *sched, res storyResult) storyResult {
	g := sc.gate
	if res.status != tasks.Failed || g == nil || g.off {
		return res
	}
	if g.stop == "" {
		g.check(ctx, r, "", nil, false)
	}
	if g.stop != "" {
		res.overBudget = true
	}
	return res
}

// finishOverBudget records a story the budget cut off: its work so far is
// committed and pushed (from its worktree, when isolated) and it is put
// back as it was before this run, to go on after a resume.
func (r *run) finishOverBudget(ctx context.Context, res storyResult, s *tasks.Story, stopped bool) {
	msg := fmt.Sprintf("%s: %s (work so far; %s)", s.ID, s.Title, acpmsg.CodeBudgetExceeded)
	if res.dir != "" {
		gctx, cancel := gitContext(ctx, stopped)
		defer cancel()
		defer r.git.removeWorktree(gctx, res.dir)
		if _, err := r.git.applyWorktree(gctx, res.dir, r.req.TaskFilePath, msg); err != nil {
			r.log.Warn("the work so far of a story the budget cut off could not be kept", "story", s.ID, "err", err)
		}
	}
	r.setStatus(s.ID, res.prev, appendNote(s.Notes, "cut off by the budget ("+acpmsg.CodeBudgetExceeded+"); its work so far is committed"))
	r.persist(ctx, msg, stopped)
	// Reported as still in progress, as a story a stop cut off (the
	// put-back is the task file's, never a report's).
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: acpmsg.StoryInProgress,
		Output: acpmsg.TruncateOutput(fmt.Sprintf("%s was cut off: its container's model calls are past the budget (%s); its work so far is committed and it goes on after 'aimi swarm resume'. The agent's last word: %s", s.ID, acpmsg.CodeBudgetExceeded, oneLine(res.output, 600)))})
}

// storyStatus is story id's status in the task file (pending when it is
// not there): a report that changes nothing.
func (r *run) storyStatus(id string) string {
	for _, s := range r.file.UserStories {
		if s.ID == id {
			return string(s.Status)
		}
	}
	return acpmsg.StoryPending
}
