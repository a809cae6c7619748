package orchestrator

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
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

// storyAtEnd is the story c was on when it ended without completing: the
// first in progress, else the first failed, in the task file's order; ""
// when none was.
func (c *ctr) storyAtEnd(reported map[string]tasks.Status) string {
	failed := ""
	for _, st := range c.storyDetails(reported) {
		switch tasks.Status(st.Status) {
		case tasks.InProgress:
			return st.ID
		case tasks.Failed:
			if failed == "" {
				failed = st.ID
			}
		}
	}
	return failed
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

// view is the swarm as the API shows it.
func (sw *swarm) view() api.SwarmView {
	snap := sw.led.snapshot()
	// Story statuses are read before sw.mu, as the snapshot is: the ledger
	// is never locked under sw.mu here.
	reported := make(map[string]map[string]tasks.Status, len(snap.Containers))
	for _, e := range snap.Containers {
		reported[e.ContainerName] = sw.led.stories(e.ContainerName)
	}
	v := api.SwarmView{RepoPath: sw.repo, State: snap, Containers: []api.ContainerDetail{}, Summary: summaryOf(snap)}
	waits := sw.m.limitWaits(sw.id)
	sw.mu.Lock()
	names := make([]string, 0, len(sw.ctrs))
	for _, c := range sw.ctrs {
		names = append(names, c.name)
	}
	sw.mu.Unlock()
	rules := make(map[string]*api.EgressRules, len(names))
	for _, n := range names {
		rules[n] = sw.m.egressRules(contract.Sandbox{Swarm: sw.id, Container: n})
	}
	v.Conflicts, v.Land = sw.radarView(), sw.withCosts(sw.landView())
	v.Attempts = sw.attemptsView()
	if snap != nil && len(v.Attempts) > 0 {
		snap.Attempts = v.Attempts // the file's shape: its attempts section too
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, c := range sw.ctrs {
		d := api.ContainerDetail{Name: c.name, ContainerID: c.id, TaskFile: c.taskFile, Branch: c.branch,
			ExitCode: c.exitCode, OOMKilled: c.oom, Errors: c.errorsView(), LastOutput: c.lastOutput,
			Rejected: c.rejected, EgressDenied: c.egressDenied, GitRefused: c.gitRefused, PRURL: c.prURL, Node: c.node}
		d.Stories = c.storyDetails(reported[c.name])
		d.LimitWaits, d.Egress = waits[c.name], rules[c.name]
		if e := snap.Container(c.name); e != nil {
			d.Status, d.CompletedWithFailures = string(e.Status), e.CompletedWithFailures()
			if d.PRURL == nil {
				d.PRURL = e.PRURL
			}
			d.Finished = e.Status.Terminal() && !c.supervisedLocked()
		}
		v.Containers = append(v.Containers, d)
	}
	return v
}
