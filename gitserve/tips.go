package gitserve

import (
	"sync"

	"github.com/aimi-tools/swarm/contract"
)

// tips tells who asked (OnTip) of every branch that moved.
type tips struct {
	mu sync.Mutex
	fn func(sb contract.Sandbox)
}

// OnTip sets fn to hear of every container whose branch moved in the
// service's repository (a push, or a salvage), after the new tip is
// recorded, so Received gives it. fn must return at once: the push's
// answer waits for it (the conflict radar only notes that it must look).
func (s *Service) OnTip(fn func(sb contract.Sandbox)) {
	s.tips.mu.Lock()
	defer s.tips.mu.Unlock()
	s.tips.fn = fn
}

func (t *tips) moved(sb contract.Sandbox) {
	t.mu.Lock()
	fn := t.fn
	t.mu.Unlock()
	if fn != nil {
		fn(sb)
	}
}
