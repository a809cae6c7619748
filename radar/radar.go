package radar

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is what merging a pair of tips would give.
type Kind string

const (
	// KindConflict: the merge would stop on the pair's Files.
	KindConflict Kind = "conflict"
	// KindOverlap: both sides changed Files, and the merge is clean.
	KindOverlap Kind = "overlap"
)

// Pair is the outcome of one pair: two containers' branches, or one
// container's branch against the landing target (Onto names it, and
// Containers holds the one container).
type Pair struct {
	Containers []string `json:"containers"`
	Onto       string   `json:"onto,omitempty"`
	Files      []string `json:"files"`
	Kind       Kind     `json:"kind"`
}

// Key names the pair independently of its outcome.
func (p Pair) Key() string {
	if p.Onto != "" {
		return p.Containers[0] + "\x00onto\x00" + p.Onto
	}
	return strings.Join(p.Containers, "\x00")
}

// Same reports whether p and q say the same thing of the same pair.
func (p Pair) Same(q Pair) bool {
	return p.Key() == q.Key() && p.Kind == q.Kind && slices.Equal(p.Files, q.Files)
}

// Report is one look of a radar: every pair with an outcome, and what
// changed since the look before.
type Report struct {
	Pairs []Pair
	// Detected are pairs that are new, or whose kind changed.
	Detected []Pair
	// Changed are pairs of the same kind as before whose files changed.
	Changed []Pair
	// Cleared are the outcomes that no longer hold: the pair has none now,
	// or one of another kind (a conflict that became an overlap is in
	// Cleared as the conflict and in Detected as the overlap).
	Cleared []Pair
	// Merged is how many pairs this look looked at again (their tips moved).
	Merged int
	// CPU is what the look's git processes took, 0 when the radar's
	// runner cannot say (see CPURunner).
	CPU time.Duration
}

// Conflicts is the pairs of r that would conflict.
func (r Report) Conflicts() []Pair {
	var out []Pair
	for _, p := range r.Pairs {
		if p.Kind == KindConflict {
			out = append(out, p)
		}
	}
	return out
}

// Target is the landing target: its name (a branch) and its commit.
type Target struct {
	Name   string
	Commit string
}

// Radar keeps the last outcome of every pair of one swarm. It is not safe
// for concurrent use: a swarm's looks run one at a time.
type Radar struct {
	m     *merger
	pairs map[string]pairState
}

// pairState is a pair's outcome and the tips it was merged at.
type pairState struct {
	a, b string // tips merged (b is the target's commit for an onto pair)
	out  *Pair  // nil: nothing to report
}

// New is a radar over the repository at dir (bare or not) whose merges
// write their trees under scratch (a directory the radar owns; made when
// needed, emptied after every look).
func New(git Runner, dir, scratch string) *Radar {
	return &Radar{m: &merger{git: git, dir: dir, scratch: scratch}, pairs: map[string]pairState{}}
}

// Look merges again every pair whose tips moved since the last look:
// tips maps each container to its branch's tip (a container without a
// tip yet is left out), target is where the branches will land (its
// Commit empty: no target pairs).
func (r *Radar) Look(ctx context.Context, target Target, tips map[string]string) (Report, error) {
	if err := r.m.check(ctx); err != nil {
		return Report{}, err
	}
	defer r.m.clean()
	r.m.target, r.m.cpu = target.Commit, 0
	prev := r.current()
	names := make([]string, 0, len(tips))
	for n, tip := range tips {
		if tip != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	seen := map[string]bool{}
	merged := 0
	for i, a := range names {
		for _, b := range names[i+1:] {
			p := Pair{Containers: []string{a, b}}
			n, err := r.lookPair(ctx, p, tips[a], tips[b], seen)
			if err != nil {
				return Report{}, err
			}
			merged += n
		}
		if target.Commit != "" {
			p := Pair{Containers: []string{a}, Onto: target.Name}
			n, err := r.lookPair(ctx, p, tips[a], target.Commit, seen)
			if err != nil {
				return Report{}, err
			}
			merged += n
		}
	}
	for key := range r.pairs {
		if !seen[key] {
			delete(r.pairs, key) // a container gone, or without a tip now
		}
	}
	rep := diff(prev, r.current())
	rep.Merged, rep.CPU = merged, r.m.cpu
	return rep, nil
}

// lookPair merges p's tips a and b unless they are the ones merged last.
func (r *Radar) lookPair(ctx context.Context, p Pair, a, b string, seen map[string]bool) (int, error) {
	key := p.Key()
	seen[key] = true
	old, ok := r.pairs[key]
	if ok && old.a == a && old.b == b {
		return 0, nil
	}
	out, err := r.m.merge(ctx, a, b)
	if err != nil {
		return 0, fmt.Errorf("radar: merge %s: %w", strings.Join(append(p.Containers, p.Onto), " and "), err)
	}
	st := pairState{a: a, b: b}
	if out.kind != "" {
		p.Kind, p.Files = out.kind, out.files
		st.out = &p
	}
	r.pairs[key] = st
	return 1, nil
}

// diff is the report of now against the look before, prev.
func diff(prev, now []Pair) Report {
	rep := Report{Pairs: now}
	was := map[string]Pair{}
	for _, p := range prev {
		was[p.Key()] = p
	}
	for _, p := range now {
		q, ok := was[p.Key()]
		switch {
		case !ok || q.Kind != p.Kind:
			rep.Detected = append(rep.Detected, p)
		case !q.Same(p):
			rep.Changed = append(rep.Changed, p)
		}
		if !ok || q.Kind == p.Kind {
			delete(was, p.Key())
		}
	}
	for _, p := range prev {
		if _, gone := was[p.Key()]; gone {
			rep.Cleared = append(rep.Cleared, p)
		}
	}
	return rep
}

// current is every pair with an outcome, in a stable order.
func (r *Radar) current() []Pair {
	var out []Pair
	for _, st := range r.pairs {
		if st.out != nil {
			out = append(out, *st.out)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}
