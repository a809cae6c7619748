package gitserve

import (
	"net/http"
	"sync"

	"github.com/aimi-tools/swarm/contract"
)

// budgetSlot holds the Budgets the daemon sets once it has built them.
type budgetSlot struct {
	mu sync.Mutex
	b  contract.Budgets
}

// SetBudgets makes the service pass contract.BudgetPath to b; before,
// such requests get 503 and the runner asks again (budgets fail closed).
func (s *Service) SetBudgets(b contract.Budgets) {
	s.budget.mu.Lock()
	s.budget.b = b
	s.budget.mu.Unlock()
}

func (s *Service) serveBudget(w http.ResponseWriter, r *http.Request, rec record) {
	s.budget.mu.Lock()
	b := s.budget.b
	s.budget.mu.Unlock()
	switch {
	case r.Method != http.MethodPost:
		deny(w, http.StatusMethodNotAllowed, "aimi: budget questions are POSTed")
		return
	case b == nil:
		deny(w, http.StatusServiceUnavailable, "aimi: budget questions are not taken yet (the daemon is starting); try again")
		return
	}
	b.ServeBudget(w, r, contract.Caller{RepoPath: rec.RepoPath, SwarmID: rec.SwarmKey, Container: rec.Container, Branch: rec.Branch})
}
