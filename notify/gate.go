package notify

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// Default bounds of the notices of waiting permission requests: in each
// window at most DefaultRequestsPerContainer of one container and
// DefaultRequestsPerSwarm of one swarm go out one by one; the rest are
// counted and told in one notice per swarm when the window ends ("12 more
// permission requests from aimi-x"). A person reads the inbox for the
// details; an agent that asks without end (its requests refused, timed
// out or answered fast) cannot make a notice, a webhook post and a run of
// notify.command of each.
const (
	DefaultRequestWindow        = time.Minute
	DefaultRequestsPerContainer = 3
	DefaultRequestsPerSwarm     = 6
)

// gate counts one window's notices of waiting requests. Only the
// notifier's Run goroutine uses it.
type gate struct {
	perContainer, perSwarm int
	byContainer            map[contract.Sandbox]int
	bySwarm                map[string]int
	held                   map[string]*heldNotices // by swarm
}

// heldNotices are one swarm's requests not told one by one.
type heldNotices struct {
	repo  string
	board string
	by    map[string]int // by container
	last  time.Time
}

func newGate(perContainer, perSwarm int) *gate {
	g := &gate{perContainer: perContainer, perSwarm: perSwarm}
	g.reset()
	return g
}

func (g *gate) reset() {
	g.byContainer, g.bySwarm, g.held = map[contract.Sandbox]int{}, map[string]int{}, map[string]*heldNotices{}
}

// admit reports whether no may go out now; one it holds back is counted.
func (g *gate) admit(no Notice) bool {
	if no.Kind != KindRequestWaiting {
		return true
	}
	sb := contract.Sandbox{Swarm: no.SwarmID, Container: no.Container}
	if g.byContainer[sb] < g.perContainer && g.bySwarm[no.SwarmID] < g.perSwarm {
		g.byContainer[sb]++
		g.bySwarm[no.SwarmID]++
		return true
	}
	h := g.held[no.SwarmID]
	if h == nil {
		h = &heldNotices{repo: no.Repo, board: no.Board, by: map[string]int{}}
		g.held[no.SwarmID] = h
	}
	h.by[no.Container]++
	h.last = no.Time
	return false
}

// flush ends the window: one notice per swarm of the requests held back.
func (g *gate) flush() []Notice {
	var out []Notice
	for swarm, h := range g.held {
		out = append(out, h.notice(swarm))
	}
	g.reset()
	slices.SortFunc(out, func(a, b Notice) int { return strings.Compare(a.SwarmID, b.SwarmID) })
	return out
}

// notice is the one notice of a swarm's held requests, naming at most
// maxListed containers.
func (h *heldNotices) notice(swarm string) Notice {
	names := make([]string, 0, len(h.by))
	total := 0
	for c, n := range h.by {
		names = append(names, c)
		total += n
	}
	// Most requests first.
	slices.SortFunc(names, func(a, b string) int {
		if d := h.by[b] - h.by[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, maxListed+1)
	for i, c := range names {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("%d other containers", len(names)-maxListed))
			break
		}
		parts = append(parts, fmt.Sprintf("%d from %s", h.by[c], c))
	}
	no := Notice{Kind: KindRequestWaiting, Time: h.last, Repo: h.repo, SwarmID: swarm, More: total, Board: h.board}
	if len(names) == 1 {
		no.Container = names[0]
	}
	no.Text = fmt.Sprintf("%s: %d more permission requests wait (%s). See them: aimi swarm inbox", filepath.Base(h.repo), total, strings.Join(parts, ", "))
	if no.Board != "" {
		no.Text += " " + no.Board
	}
	return no
}
