package gateway

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/usage"
)

// metLimits remembers, per container, the last limited answer its calls
// got from each provider: the runner asks for it (contract.GatewayLimitsPath)
// to tell a turn that ended in error because of a limit from any other.
type metLimits struct {
	mu   sync.Mutex
	met  map[contract.Sandbox]map[string]contract.GatewayLimit // container -> provider -> its last limit
	held map[contract.Sandbox]*heldTime
}

// heldTime is how long the limits a container met held it: the union of
// their spans from hit to reset.
type heldTime struct {
	total   time.Duration
	covered time.Time // the latest reset counted
}

// note records that a call of k to provider got a limited answer at hit,
// the limit holding until until.
func (m *metLimits) note(k contract.Sandbox, provider string, hit, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.met == nil {
		m.met = map[contract.Sandbox]map[string]contract.GatewayLimit{}
	}
	byProv := m.met[k]
	if byProv == nil {
		byProv = map[string]contract.GatewayLimit{}
		m.met[k] = byProv
	}
	if m.held == nil {
		m.held = map[contract.Sandbox]*heldTime{}
	}
	h := m.held[k]
	if h == nil {
		h = &heldTime{}
		m.held[k] = h
	}
	if from := later(hit, h.covered); until.After(from) {
		h.total += until.Sub(from)
		h.covered = until
	}
	l := byProv[provider]
	l.Provider, l.Hit = provider, hit
	if until.After(l.Until) || l.Until.Before(hit) {
		l.Until = until
	}
	byProv[provider] = l
}

// forget drops what k met (its access was revoked).
func (m *metLimits) forget(k contract.Sandbox) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.met, k)
	delete(m.held, k)
}

// LimitHeld says how long the provider limits that calls of container sb
// met held it, from each limited answer to its reset
// (overlaps counted once): the time its runner waited instead of working,
// which the container's timeout does not count. It is kept in memory
// only, from the container's grant to its revoke.
func (s *Service) LimitHeld(sb contract.Sandbox) time.Duration {
	s.met.mu.Lock()
	defer s.met.mu.Unlock()
	if h := s.met.held[sb]; h != nil {
		return h.total
	}
	return 0
}

func (m *metLimits) of(k contract.Sandbox) map[string]contract.GatewayLimit {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]contract.GatewayLimit, len(m.met[k]))
	for p, l := range m.met[k] {
		out[p] = l
	}
	return out
}

// noteAnswer records a call's limited answer for its container: the
// provider's (status and headers as the limiter read them) or the
// gateway's own refusal of a held call (err, a *WaitError).
func (s *Service) noteAnswer(rec record, provider string, status int, err error) {
	now := time.Now()
	var we *WaitError
	switch {
	case errors.As(err, &we):
		s.met.note(rec.sandbox(), provider, now, later(we.Until, now))
	case usage.Limited(status):
		s.met.note(rec.sandbox(), provider, now, later(s.limiter.resetOf(provider, rec.Var), now))
	}
}

// noteUpstream settles a provider's limited answer as soon as its headers
// arrive, before the Observer and the sandbox read it: the limiter decides
// its reset (c.Limit, for the Observer) and the container's limits record
// it, since the runner may ask the moment its agent gave up, before the
// call is over (noteAnswer then puts in the limiter's reset).
func (s *Service) noteUpstream(p *pass, c *Call, status int, h http.Header) {
	if c.Limit = p.decide(status, h); c.Limit == nil {
		return
	}
	s.met.note(contract.Sandbox{Swarm: c.Swarm, Container: c.Container}, c.Provider, time.Now(), c.Limit.Until)
}

// serveLimits answers the container whose placeholder the request
// carries: the limits its calls met, and those of its providers and
// accounts in force now (a call of another container hit them).
func (s *Service) serveLimits(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "aimi model gateway: GET only", http.StatusMethodNotAllowed)
		return
	}
	rec, why := s.admit(r, Credential(r.Header, r.URL.RawQuery))
	if why != "" {
		s.log.Debug("model gateway refused a limits query", "why", why)
		http.Error(w, "aimi model gateway: the request carries no valid credential of this sandbox", http.StatusUnauthorized)
		return
	}
	k := rec.sandbox()
	now := time.Now()
	byProv := s.met.of(k)
	for _, acct := range s.accountsOf(k) {
		until := s.limiter.resetOf(acct.provider, acct.account)
		if l := byProv[acct.provider]; until.After(now) && until.After(l.Until) {
			l.Provider, l.Until = acct.provider, until
			byProv[acct.provider] = l
		}
	}
	ans := contract.GatewayLimits{Now: now, Limits: []contract.GatewayLimit{}}
	for _, p := range slices.Sorted(maps.Keys(byProv)) {
		ans.Limits = append(ans.Limits, byProv[p])
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(ans)
}

// accountsOf lists the providers and key variables k holds placeholders
// for.
func (s *Service) accountsOf(k contract.Sandbox) []gateKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gateKey
	for _, r := range s.byHash {
		if r.Swarm == k.Swarm && r.Container == k.Container && !slices.Contains(out, gateKey{r.Provider, r.Var}) {
			out = append(out, gateKey{r.Provider, r.Var})
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
