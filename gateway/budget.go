package gateway

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/aimi-tools/swarm/contract"
)

// Budget says why a container's model calls must be refused: its spend
// is past its budgets' hard cap (package budget's Keeper); "" lets the
// call through.
type Budget interface {
	Refusal(sb contract.Sandbox) string
}

// budgetSlot holds the Budget the daemon sets once it has built it.
type budgetSlot struct {
	mu sync.Mutex
	b  Budget
}

// SetBudget makes every call ask b first; before (or with nil) no call
// is refused for its cost.
func (s *Service) SetBudget(b Budget) {
	s.budget.mu.Lock()
	s.budget.b = b
	s.budget.mu.Unlock()
}

// budgetErrorType is the error type of a refusal for the budget: the
// providers' own for an account that may not spend (Anthropic answers it
// with 402), so that an agent ends its turn instead of retrying as after
// a rate limit.
const budgetErrorType = "billing_error"

// refuseOverBudget answers a call of sb that its budget refuses: HTTP 402
// with the provider-shaped error naming the budget, and reports whether
// it did.
func (s *Service) refuseOverBudget(w http.ResponseWriter, cl *call, sb contract.Sandbox) bool {
	s.budget.mu.Lock()
	b := s.budget.b
	s.budget.mu.Unlock()
	if b == nil {
		return false
	}
	why := b.Refusal(sb)
	if why == "" {
		return false
	}
	cl.c.Status, cl.c.Refused = http.StatusPaymentRequired, "budget exceeded"
	observe(s.observer, &cl.c, true)
	s.log.Warn("model gateway refused a call: the container's budget is spent", "provider", cl.c.Provider, "container", cl.c.Container, "why", why)
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": budgetErrorType, "message": "aimi model gateway: " + why}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusPaymentRequired)
	w.Write(append(body, '\n'))
	return true
}
