package metrics

import (
	"net/http"
	"strings"
	"sync"
)

// maxKinds bounds the distinct engine request kinds counted by name.
const maxKinds = 64

// EngineTransport wraps the Engine API client's transport so that every
// request is counted by kind.
func (m *Metrics) EngineTransport(next http.RoundTripper) http.RoundTripper {
	return roundTripper{next: next, count: func(r *http.Request) {
		m.engine.WithLabelValues(m.kinds.add(RequestKind(r.Method, r.URL.Path))).Inc()
	}}
}

type roundTripper struct {
	next  http.RoundTripper
	count func(*http.Request)
}

func (t roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	t.count(r)
	return t.next.RoundTrip(r)
}

// verbs are the path segments of the Engine API that name an operation, not
// an object: /containers/create, /containers/json (list), /networks/prune.
var verbs = map[string]bool{"create": true, "json": true, "prune": true, "load": true, "search": true, "get": true}

// RequestKind is an Engine API request's method and path with the version
// prefix dropped and object ids or names replaced by {id}:
// "GET containers/{id}/json", "POST containers/create", "GET events".
func RequestKind(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) > 0 && strings.HasPrefix(segs[0], "v1.") {
		segs = segs[1:]
	}
	var kind string
	switch {
	case len(segs) == 0 || segs[0] == "":
		kind = "/"
	case len(segs) == 1:
		kind = segs[0]
	case len(segs) == 2 && verbs[segs[1]]:
		kind = segs[0] + "/" + segs[1]
	case len(segs) == 2:
		kind = segs[0] + "/{id}"
	default:
		kind = segs[0] + "/{id}/" + segs[len(segs)-1]
	}
	return method + " " + kind
}

// kindSet admits at most max distinct kinds; later ones count as "other".
type kindSet struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func newKindSet(max int) *kindSet { return &kindSet{max: max, seen: map[string]bool{}} }

func (s *kindSet) add(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[k] {
		return k
	}
	if len(s.seen) >= s.max {
		return "other"
	}
	s.seen[k] = true
	return k
}
