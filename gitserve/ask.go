package gitserve

import (
	"net/http"
	"sync"

	"github.com/aimi-tools/swarm/contract"
)

// askSlot holds the Asks the daemon sets once it has built its inbox
// (after the service, which the orchestrator needs first).
type askSlot struct {
	mu   sync.Mutex
	asks contract.Asks
}

// SetAsks makes the service pass contract.AskPath to a; before, such
// requests get 503 (the runner sends them again).
func (s *Service) SetAsks(a contract.Asks) {
	s.ask.mu.Lock()
	s.ask.asks = a
	s.ask.mu.Unlock()
}

func (s *Service) serveAsk(w http.ResponseWriter, r *http.Request, rec record) {
	s.ask.mu.Lock()
	a := s.ask.asks
	s.ask.mu.Unlock()
	if a == nil || r.Method != http.MethodPost {
		deny(w, http.StatusServiceUnavailable, "aimi: permission requests are not taken (the daemon's policy does not ask, or it is starting); try again")
		return
	}
	a.ServeAsk(w, r, contract.Caller{RepoPath: rec.RepoPath, SwarmID: rec.SwarmKey, Container: rec.Container, Branch: rec.Branch})
}
