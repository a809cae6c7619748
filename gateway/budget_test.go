package gateway

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// overBudget refuses the calls of the containers it holds.
type overBudget struct {
	mu   sync.Mutex
	over map[contract.Sandbox]string
}

func (b *overBudget) Refusal(sb contract.Sandbox) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over[sb]
}

// A container past its budget's hard cap gets HTTP 402 with the
// provider-shaped billing error naming the budget, and its call never
// reaches the provider; another container's calls go through.
func TestCallsPastTheBudgetAreRefusedAsABillingError(t *testing.T) {
	f := newFixture(t, Limits{})
	one, two := contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, contract.Sandbox{Swarm: "sw1", Container: "aimi-two"}
	b := &overBudget{over: map[contract.Sandbox]string{one: "BUDGET_EXCEEDED: the swarm spent 6.0000, past its budget 5.0000"}}
	f.s.SetBudget(b)
	c := f.client("127.0.0.1")
	g1, err := f.s.Grant(one, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := f.s.Grant(two, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, c, g1.Env["ANTHROPIC_BASE_URL"], g1.Env["ANTHROPIC_API_KEY"], `{"model":"m","max_tokens":5,"messages":[]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 402 || e.Type != "error" || e.Error.Type != "billing_error" ||
		!strings.HasPrefix(e.Error.Message, "aimi model gateway: BUDGET_EXCEEDED: the swarm spent 6.0000") {
		t.Fatalf("over budget: %d %s", resp.StatusCode, body)
	}
	f.up.mu.Lock()
	reached := len(f.up.seen)
	f.up.mu.Unlock()
	if reached != 0 {
		t.Fatalf("a refused call reached the provider")
	}
	resp = post(t, c, g2.Env["ANTHROPIC_BASE_URL"], g2.Env["ANTHROPIC_API_KEY"], `{"model":"m","max_tokens":5,"messages":[]}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("another container's call: %d", resp.StatusCode)
	}
	f.rec.waitCalls(t, 1)
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	if len(f.rec.calls) == 0 || f.rec.calls[0].Status != 402 || f.rec.calls[0].Refused != "budget exceeded" {
		t.Fatalf("observer saw %+v", f.rec.calls)
	}
}
