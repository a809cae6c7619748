package budget

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

func keeper(lim *Limits, seed func(context.Context, string, string, time.Time) ([]Spend, error)) *Keeper {
	return New(Config{Limits: func(string) Limits { return *lim }, Seed: seed, Logger: slog.New(slog.DiscardHandler)})
}

func span(id string, a, b time.Time) contract.BudgetStory {
	return contract.BudgetStory{ID: id, Start: a.Format(time.RFC3339Nano), End: b.Format(time.RFC3339Nano)}
}

func TestSwarmBudgetCountsEveryContainerAndHoldsWhenRaised(t *testing.T) {
	lim := &Limits{Swarm: 0.05}
	k := keeper(lim, nil)
	now := time.Now()
	k.Add(contract.Sandbox{Swarm: "s1", Container: "a"}, now, 0.03)
	k.Add(contract.Sandbox{Swarm: "s1", Container: "b"}, now, 0.01)
	k.Add(contract.Sandbox{Swarm: "s2", Container: "a"}, now, 5) // another swarm
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s1", Container: "a"}, contract.BudgetRequest{}); a.State != contract.BudgetGo {
		t.Fatalf("under budget: %+v", a)
	}
	k.Add(contract.Sandbox{Swarm: "s1", Container: "b"}, now, 0.01)
	a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s1", Container: "a"}, contract.BudgetRequest{})
	if a.State != contract.BudgetStop || !strings.HasPrefix(a.Message, "BUDGET_EXCEEDED: the swarm spent 0.0500 of its budget 0.0500 (swarm.budget") {
		t.Fatalf("at budget: %+v", a)
	}
	lim.Swarm = 0.10 // raised in the configuration
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s1", Container: "a"}, contract.BudgetRequest{}); a.State != contract.BudgetGo {
		t.Fatalf("raised: %+v", a)
	}
	lim.Swarm = 0
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s2", Container: "a"}, contract.BudgetRequest{}); a.State != contract.BudgetGo {
		t.Fatalf("no budget: %+v", a)
	}
}

// A story's spend is the container's calls while it ran; one at its
// budget stops the container, another story's or container's do not count.
func TestStoryBudgetCountsTheStorysCallsOfItsContainer(t *testing.T) {
	lim := &Limits{Story: 0.02}
	k := keeper(lim, nil)
	t0 := time.Now()
	k.Add(contract.Sandbox{Swarm: "s", Container: "a"}, t0.Add(time.Second), 0.015)
	k.Add(contract.Sandbox{Swarm: "s", Container: "b"}, t0.Add(2*time.Second), 0.015) // another container
	k.Add(contract.Sandbox{Swarm: "s", Container: "a"}, t0.Add(5*time.Second), 0.015) // after the story
	q := contract.BudgetRequest{Stories: []contract.BudgetStory{span("US-001", t0, t0.Add(3*time.Second))}}
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s", Container: "a"}, q); a.State != contract.BudgetGo {
		t.Fatalf("under: %+v", a)
	}
	k.Add(contract.Sandbox{Swarm: "s", Container: "a"}, t0.Add(2*time.Second), 0.006)
	a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s", Container: "a"}, q)
	if a.State != contract.BudgetStop || !strings.Contains(a.Message, "US-001 spent 0.0210 of its budget 0.0200 (agent.story_budget") {
		t.Fatalf("over: %+v", a)
	}
	// Ids are the container's: one that is not a story id is not echoed.
	q.Stories[0].ID = "US-001\x1b[2J"
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s", Container: "a"}, q); a.State != contract.BudgetGo {
		t.Fatalf("bad id: %+v", a)
	}
}

// Calls journaled before the daemon started are read back once per swarm
// and count; later ones come from Add only (never twice).
func TestSeedIsReadOnceAndOnlyBeforeTheDaemon(t *testing.T) {
	lim := &Limits{Swarm: 1}
	var reads atomic.Int32
	k := keeper(lim, func(_ context.Context, repo, id string, before time.Time) ([]Spend, error) {
		reads.Add(1)
		return []Spend{{Container: "a", At: before.Add(-time.Hour), Cost: 0.7}, {Container: "a", At: before.Add(time.Second), Cost: 0.5}}, nil
	})
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s", Container: "a"}, contract.BudgetRequest{}); a.State != contract.BudgetGo || k.Spent("s") != 0.7 {
		t.Fatalf("%+v spent %v, want go and 0.7", a, k.Spent("s"))
	}
	k.Add(contract.Sandbox{Swarm: "s", Container: "a"}, time.Now(), 0.3)
	if a := k.Check(context.Background(), "/r", contract.Sandbox{Swarm: "s", Container: "a"}, contract.BudgetRequest{}); a.State != contract.BudgetStop || reads.Load() != 1 {
		t.Fatalf("%+v after %d reads", a, reads.Load())
	}
}

func TestServeBudgetRefusesWhatIsNotARequest(t *testing.T) {
	k := keeper(&Limits{Swarm: 1}, nil)
	for body, want := range map[string]int{`{"stories":[]}`: 200, `not json`: 400, `{"stories":` + strings.Repeat(`x`, contract.BudgetMaxBody) + `}`: 400} {
		w := httptest.NewRecorder()
		k.ServeBudget(w, httptest.NewRequest(http.MethodPost, contract.BudgetPath, strings.NewReader(body)), contract.Caller{SwarmID: "s", Container: "a"})
		if w.Code != want {
			t.Errorf("%.20q: HTTP %d, want %d", body, w.Code, want)
		}
	}
}

// The hard cap: past a budget by more than its grace, Refusal names it.
// The swarm's counts all its calls; a story's counts the container's calls
// since its oldest story in flight began, as its last question said.
func TestRefusalPastTheBudgetAndItsGrace(t *testing.T) {
	lim := &Limits{Swarm: 10, Grace: 0.1}
	k := keeper(lim, nil)
	a, b := contract.Sandbox{Swarm: "s", Container: "a"}, contract.Sandbox{Swarm: "s", Container: "b"}
	if why := k.Refusal(a); why != "" {
		t.Fatalf("before any question: %q", why)
	}
	k.Check(context.Background(), "/r", a, contract.BudgetRequest{})
	k.Add(a, time.Now(), 6)
	k.Add(b, time.Now(), 5)
	if why := k.Refusal(a); why != "" {
		t.Fatalf("11 of 10 within the grace of 1: %q", why)
	}
	k.Add(b, time.Now(), 0.5)
	if why := k.Refusal(b); !strings.HasPrefix(why, "BUDGET_EXCEEDED: the swarm spent 11.5000, past its budget 10.0000 and its grace (swarm.budget, swarm.budget_grace 10%)") {
		t.Fatalf("11.5 of 10: %q", why)
	}
	lim.Swarm, lim.Story = 0, 2
	t0 := time.Now()
	k.Check(context.Background(), "/r", a, contract.BudgetRequest{Running: []contract.BudgetStory{{ID: "US-001", Start: t0.Add(-time.Hour).Format(time.RFC3339Nano)}}})
	if why := k.Refusal(a); !strings.HasPrefix(why, "BUDGET_EXCEEDED: the story in flight spent 6.0000, past its budget 2.0000") {
		t.Fatalf("story since an hour ago: %q", why)
	}
	// A go for a new story, none in flight: it counts from now.
	c := contract.Sandbox{Swarm: "s", Container: "c"}
	k.Add(c, k.start, 5) // before the story: not its
	if ans := k.Check(context.Background(), "/r", c, contract.BudgetRequest{}); ans.State != contract.BudgetGo {
		t.Fatalf("c: %+v", ans)
	}
	if why := k.Refusal(c); why != "" {
		t.Fatalf("new story: %q", why)
	}
	k.Add(c, time.Now().Add(time.Second), 2.3)
	if why := k.Refusal(c); !strings.Contains(why, "spent 2.3000, past its budget 2.0000") {
		t.Fatalf("2.3 of 2 past its grace 0.2: %q", why)
	}
}
