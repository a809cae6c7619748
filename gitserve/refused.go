package gitserve

import (
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Kinds of refusal: a container is reported at most once per kind every
// refusalEvery.
const (
	refusedOutside    = "outside"    // its token, from elsewhere
	refusedRepository = "repository" // another swarm's repository
	refusedMalformed  = "malformed"  // a push git would not send
	refusedRef        = "ref"        // a ref other than its branch
	refusedMaxPush    = "max-push"   // larger than git.max_push
	refusedMaxMirror  = "max-mirror" // past the swarm's git.max_mirror
)

const (
	// maxRefusalReason bounds a reported reason: it becomes one line of
	// the container's journal.
	maxRefusalReason = 400
	// refusalEvery: a sandbox looping on a refused request floods no
	// journal (the journal's cap leaves daemon records in).
	refusalEvery = 10 * time.Second
)

type refusalKey struct {
	sb   contract.Sandbox
	kind string
}

// refusals is where the service reports what it refuses granted
// containers (OnRefused), and when it last did, per container and kind.
type refusals struct {
	mu     sync.Mutex
	fn     func(sb contract.Sandbox, reason string)
	recent map[refusalKey]time.Time
}

// OnRefused sets fn to hear the requests of granted containers the
// service refuses: the container whose token the request carried and why,
// in the service's words (one line of at most 400 bytes, control
// characters escaped; what the sandbox sent is bounded). At most one per
// container and kind of refusal every ten seconds; a request without a
// valid token names no container and is only logged. fn must return soon:
// the request waits for it. The orchestrator sets it once, before it
// adopts any container.
func (s *Service) OnRefused(fn func(sb contract.Sandbox, reason string)) {
	s.refusals.mu.Lock()
	defer s.refusals.mu.Unlock()
	s.refusals.fn = fn
}

// refused reports one refusal of kind for rec's container.
func (s *Service) refused(rec record, kind, reason string) {
	sb := rec.sandbox()
	fn := s.refusals.fresh(refusalKey{sb: sb, kind: kind}, time.Now())
	if fn != nil {
		fn(sb, refusalText(reason))
	}
}

// fresh returns the hook when key was not reported in the last
// refusalEvery (and notes it now), nil otherwise or without a hook.
func (r *refusals) fresh(key refusalKey, now time.Time) func(contract.Sandbox, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fn == nil {
		return nil
	}
	if t, ok := r.recent[key]; ok && now.Sub(t) < refusalEvery {
		return nil
	}
	if r.recent == nil {
		r.recent = map[refusalKey]time.Time{}
	}
	if len(r.recent) > 4096 {
		for k, t := range r.recent {
			if now.Sub(t) >= refusalEvery {
				delete(r.recent, k)
			}
		}
	}
	r.recent[key] = now
	return r.fn
}

// refusalText is reason as one line: blanks (newlines too) folded,
// control characters escaped, at most maxRefusalReason bytes.
func refusalText(reason string) string {
	return clipReason(termsafe.String(strings.Join(strings.Fields(reason), " ")), maxRefusalReason)
}

// refusedRefs names refs (from the sandbox) bounded: the first three,
// each clipped and quoted (clip), and how many more.
func refusedRefs(refs []string) string {
	var b strings.Builder
	for i, ref := range refs {
		if i == 3 {
			b.WriteString(" and " + strconv.Itoa(len(refs)-3) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(clip(ref))
	}
	return b.String()
}

// clipReason cuts s to at most n bytes at a rune boundary, marking the cut.
func clipReason(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
