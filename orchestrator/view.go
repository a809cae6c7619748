package orchestrator

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/tasks"
)

// List returns every swarm the Manager holds (started here or adopted at
// Recover), sorted by repository. It reads memory only: no engine call, no
// repo lock, so a board can ask often while a Stop waits out its grace.
func (m *Manager) List(ctx context.Context) []api.SwarmView {
	m.mu.Lock()
	sws := slices.Collect(maps.Values(m.swarms))
	m.mu.Unlock()
	slices.SortFunc(sws, func(a, b *swarm) int { return strings.Compare(a.repo, b.repo) })
	out := make([]api.SwarmView, 0, len(sws))
	for _, sw := range sws {
		out = append(out, sw.view())
	}
	return out
}

// storyDetails is c's task file as a graph with the statuses reported.
func (c *ctr) storyDetails(reported map[string]tasks.Status) []api.StoryDetail {
	if c.tf == nil {
		return nil
	}
	out := make([]api.StoryDetail, 0, len(c.tf.UserStories))
	for _, st := range c.tf.UserStories {
		status := st.Status
		if r, ok := reported[st.ID]; ok {
			status = r
		}
		out = append(out, api.StoryDetail{ID: st.ID, Title: st.Title, DependsOn: append([]string{}, st.DependsOn...), Status: string(status)})
	}
	return out
}
