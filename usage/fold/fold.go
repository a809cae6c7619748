package fold

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// Totals is what some model calls spent. Cost is at the configured
// prices (models.<provider>.prices); AgentCost is what ACP agents
// reported (usage_update) for stories whose calls the gateway did not see,
// counted in Cost too when its currency is USD, never twice.
type Totals struct {
	Calls     int64              `json:"calls"`
	Tokens    usage.Usage        `json:"tokens"`
	Cost      float64            `json:"cost"`
	AgentCost map[string]float64 `json:"agentReportedCost,omitempty"`
}

// Add adds o to t.
func (t *Totals) Add(o Totals) {
	t.Calls += o.Calls
	t.Tokens = t.Tokens.Add(o.Tokens)
	t.Cost += o.Cost
	for cur, a := range o.AgentCost {
		if t.AgentCost == nil {
			t.AgentCost = map[string]float64{}
		}
		t.AgentCost[cur] += a
	}
}

// Story is one story's part ("" for calls made while no single story
// was in progress).
type Story struct {
	Story string `json:"story"`
	Totals
}

// Container is one container's calls, per story.
type Container struct {
	Name string `json:"name"`
	Totals
	Stories []Story `json:"stories"`
}

// Fold folds one container's journal records, in order, into its usage:
// the gateway's call records, each given to the one story in progress when
// the call began (by the time the container wrote the story's
// progress-updates, their cursor, since a container's lines reach the
// journal later than the gateway's records), and the cost the runner
// reported for a story from its agent.
type Fold struct {
	open      map[string]time.Time
	intervals []storySpan
	calls     []timedCall
	agent     map[string]usage.AgentCost
}

type storySpan struct {
	story      string
	start, end time.Time
}

type timedCall struct {
	at   time.Time
	call usage.Call
}

// New is an empty Fold.
func New() *Fold {
	return &Fold{open: map[string]time.Time{}, agent: map[string]usage.AgentCost{}}
}

// progress is the part of a journaled progress-update the fold reads.
type progress struct {
	Timestamp string `json:"timestamp"`
	Payload   struct {
		StoryID string `json:"storyId"`
		Status  string `json:"status"`
		Output  string `json:"output"`
	} `json:"payload"`
}

// Add folds the journal's next record.
func (f *Fold) Add(r state.Record) {
	if r.Usage != nil && r.Stream == state.StreamDaemon {
		f.calls = append(f.calls, timedCall{r.Time, *r.Usage})
		return
	}
	if !r.Valid || r.Rejected != "" || r.Type != string(acpmsg.TypeProgressUpdate) {
		return
	}
	var m progress
	if json.Unmarshal(r.Message, &m) != nil {
		return
	}
	at := r.Cursor.Time
	if at.IsZero() {
		at = r.Time
	}
	p := m.Payload
	switch p.Status {
	case acpmsg.StoryInProgress:
		// The engine stamps a line when it reads it, which under load is
		// after the agent's first call began; the runner wrote the
		// message (its own timestamp) before it started the agent.
		if written, err := time.Parse(time.RFC3339Nano, m.Timestamp); err == nil && written.Before(at) {
			at = written
		}
		if _, ok := f.open[p.StoryID]; !ok {
			f.open[p.StoryID] = at
		}
	case acpmsg.StoryCompleted, acpmsg.StoryFailed:
		if start, ok := f.open[p.StoryID]; ok {
			f.intervals = append(f.intervals, storySpan{p.StoryID, start, at})
			delete(f.open, p.StoryID)
		}
		if c, ok := usage.ParseAgentCost(p.Output); ok {
			prev := f.agent[p.StoryID]
			if prev.Currency == c.Currency {
				c.Amount += prev.Amount
			}
			f.agent[p.StoryID] = c
		}
	}
}

// storyAt is the one story in progress at t in spans, or "".
func storyAt(spans []storySpan, t time.Time) string {
	found := ""
	for _, s := range spans {
		if !t.Before(s.start) && !t.After(s.end) {
			if found != "" {
				return ""
			}
			found = s.story
		}
	}
	return found
}

// Result is the container's usage so far (a story still in progress runs
// to the end of time); the Fold takes more records after it. An
// agent-reported cost counts only for a story the gateway saw no call of.
func (f *Fold) Result(name string) Container {
	spans := slices.Clone(f.intervals)
	for id, start := range f.open {
		spans = append(spans, storySpan{id, start, time.Unix(1<<40, 0)})
	}
	stories := map[string]*Totals{}
	story := func(id string) *Totals {
		if stories[id] == nil {
			stories[id] = &Totals{}
		}
		return stories[id]
	}
	for _, c := range f.calls {
		t := story(storyAt(spans, c.at))
		t.Calls++
		t.Tokens = t.Tokens.Add(c.call.Usage)
		t.Cost += c.call.Cost
	}
	for id, c := range f.agent {
		t := story(id)
		if t.Calls > 0 {
			continue
		}
		t.AgentCost = map[string]float64{c.Currency: c.Amount}
		if c.Currency == "USD" {
			t.Cost += c.Amount
		}
	}
	cu := Container{Name: name, Stories: []Story{}}
	for _, id := range slices.Sorted(maps.Keys(stories)) {
		cu.Stories = append(cu.Stories, Story{Story: id, Totals: *stories[id]})
		cu.Add(*stories[id])
	}
	return cu
}
