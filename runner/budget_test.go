package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/tasks"
)

// budgetDaemon stands in for the daemon's budget answers on the git
// service: go until a story finished, then stop.
type budgetDaemon struct {
	mu   sync.Mutex
	seen []contract.BudgetRequest
	auth []string
}

func (d *budgetDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var q contract.BudgetRequest
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.seen = append(d.seen, q)
	d.auth = append(d.auth, r.Header.Get("Authorization"))
	d.mu.Unlock()
	ans := contract.BudgetAnswer{State: contract.BudgetGo}
	if len(q.Stories) > 0 {
		ans = contract.BudgetAnswer{State: contract.BudgetStop, Message: "BUDGET_EXCEEDED: the swarm spent 0.0600 of its budget 0.0500 (swarm.budget)\x1b[31m"}
	}
	json.NewEncoder(w).Encode(ans)
}

// A budget the daemon says is reached after the first story: that story
// completes and is pushed, no further story begins, and the run ends
// stopped with the daemon's BUDGET_EXCEEDED and its figures.
func TestBudgetStopsTheRunAtTheStoryBoundary(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "budget-token")
	s.cfg.CAFile, s.cfg.DaemonGit = s.srv.CAFile, true
	d := &budgetDaemon{}
	s.srv.Handle(contract.BudgetPath, d)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	code := Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out)
	msgs := parseAll(t, out.String())
	c := completionOf(t, msgs)
	if code != ExitOK || c.Status != acpmsg.CompletionStopped || len(c.Errors) != 1 ||
		c.Errors[0] != "BUDGET_EXCEEDED: the swarm spent 0.0600 of its budget 0.0500 (swarm.budget) [31m" {
		t.Fatalf("exit %d, completion %+v", code, c)
	}
	for _, p := range progressOf(msgs) {
		if p.story != "US-001" {
			t.Errorf("%s was begun after the budget stop: %+v", p.story, p)
		}
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Completed || got["US-002"] != tasks.Pending || got["US-003"] != tasks.Pending {
		t.Fatalf("pushed statuses %v, want US-001 completed and the rest pending", got)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) != 2 || len(d.seen[0].Stories) != 0 || len(d.seen[1].Stories) != 1 || d.seen[1].Stories[0].ID != "US-001" {
		t.Fatalf("questions %+v, want one before US-001 and one naming it after", d.seen)
	}
	st := d.seen[1].Stories[0]
	start, err1 := time.Parse(time.RFC3339Nano, st.Start)
	end, err2 := time.Parse(time.RFC3339Nano, st.End)
	if err1 != nil || err2 != nil || end.Before(start) {
		t.Fatalf("US-001 ran %q to %q", st.Start, st.End)
	}
}

// Budgets fail closed: a daemon that does not answer the question (503
// while it starts, 404, a refusal) holds the story at its boundary, which
// says so in its status, and the question is asked until the daemon
// answers; no story begins before.
func TestBudgetQuestionWithoutAnAnswerHoldsTheStory(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "budget-token")
	s.cfg.CAFile, s.cfg.DaemonGit = s.srv.CAFile, true
	var mu sync.Mutex
	asked := 0
	s.srv.Handle(contract.BudgetPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		n := asked
		mu.Unlock()
		switch n {
		case 1:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		case 2:
			http.NotFound(w, r)
		default:
			json.NewEncoder(w).Encode(contract.BudgetAnswer{State: contract.BudgetGo})
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out)
	msgs := parseAll(t, out.String())
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	ps := progressOf(msgs)
	if len(ps) == 0 || ps[0].story != "US-001" || ps[0].status != acpmsg.StoryPending ||
		!strings.Contains(ps[0].output, "US-001 waits for the daemon's answer to the budget question") || !strings.Contains(ps[0].output, "HTTP 503") {
		t.Fatalf("first progress %+v, want US-001 pending, waiting for the budget answer", ps)
	}
	for _, p := range ps[1:] {
		if p.status == acpmsg.StoryPending {
			t.Errorf("the wait was said again: %+v", p)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 2+len(f.UserStories) {
		t.Fatalf("asked %d times, want 2 unanswered and one per story", asked)
	}
}

// A remote origin with a git token and a CA is not the daemon: the budget
// question never goes there (it would hand the daemon's question, with the
// origin's token, to a third party), and the run is not held by it.
func TestBudgetQuestionNeverGoesToARemoteOrigin(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "origin-token")
	s.cfg.CAFile = s.srv.CAFile // DaemonGit unset: origin's own CA
	origin := &budgetDaemon{}
	s.srv.Handle(contract.BudgetPath, origin)
	var out syncbuf.Buffer
	Run(context.Background(), s.cfg, strings.NewReader(s.request(t)), &out)
	if c := completionOf(t, parseAll(t, out.String())); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	origin.mu.Lock()
	defer origin.mu.Unlock()
	if len(origin.seen) != 0 {
		t.Fatalf("the origin was asked about the budget %d times", len(origin.seen))
	}
}

// With a budget socket (either git mode), the question goes there, with no
// token, and not to the repository; the daemon's stop holds.
func TestBudgetQuestionGoesToTheBudgetSocket(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "origin-token")
	s.cfg.CAFile = s.srv.CAFile
	origin, daemon := &budgetDaemon{}, &budgetDaemon{}
	s.srv.Handle(contract.BudgetPath, origin)
	sock := httptest.NewServer(daemon)
	defer sock.Close()
	s.cfg.BudgetURL = sock.URL + contract.BudgetPath
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out)
	if c := completionOf(t, parseAll(t, out.String())); c.Status != acpmsg.CompletionStopped || len(c.Errors) != 1 ||
		!strings.HasPrefix(c.Errors[0], "BUDGET_EXCEEDED: the swarm spent") {
		t.Fatalf("completion %+v", c)
	}
	origin.mu.Lock()
	daemon.mu.Lock()
	defer origin.mu.Unlock()
	defer daemon.mu.Unlock()
	if len(origin.seen) != 0 || len(daemon.seen) != 2 || daemon.auth[0] != "" || daemon.auth[1] != "" {
		t.Fatalf("origin asked %d times; the socket %d times with auth %q", len(origin.seen), len(daemon.seen), daemon.auth)
	}
}

// The first budget question is asked while the workspace is filled, not
// after: the daemon's answer to it is a round trip every sandbox of a
// start makes at once. Here the workspace is answered only once the
// question arrived; a runner that asked after its workspace would find
// no ready-made workspace (the wait ends at its deadline) and the test
// says so. The answer asked ahead is the first story's: one question per
// story, as before.
func TestFirstBudgetQuestionIsAskedWhileTheWorkspaceFills(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "budget-token")
	s.cfg.CAFile, s.cfg.DaemonGit = s.srv.CAFile, true
	d := &budgetDaemon{}
	asked := make(chan struct{})
	var once sync.Once
	s.srv.Handle(contract.BudgetPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		d.ServeHTTP(w, r)
	}))
	first := make(chan bool, 1)
	s.srv.Handle(contract.WorkspacePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-asked:
			select {
			case first <- true:
			default:
			}
		case <-time.After(20 * time.Second):
			select {
			case first <- false:
			default:
			}
		}
		http.NotFound(w, r) // the runner clones
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out)
	select {
	case ok := <-first:
		if !ok {
			t.Fatal("the workspace was asked for and no budget question came within 20 s: the runner asks only after its workspace")
		}
	default:
		t.Fatal("the runner never asked for its workspace")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) != 2 || len(d.seen[0].Stories) != 0 {
		t.Fatalf("questions %+v, want the one asked ahead (for US-001) and one before US-002", d.seen)
	}
}
