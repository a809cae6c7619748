package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// adopt returns the repo's swarm, loading and reconciling it from the state
// file and the engine when the Manager does not hold it yet: it observes
// (state file, the swarm's containers, journals), plans (planAdoption) and
// carries the plan out. The caller holds the repo lock.
func (m *Manager) adopt(ctx context.Context, repo string) (*swarm, error) {
	if sw := m.getSwarm(repo); sw != nil {
		return sw, nil
	}
	store := state.Open(repo)
	st, err := store.Load(ctx)
	if errors.Is(err, state.ErrNoState) {
		st, err = m.rebuildState(ctx, repo)
		if errors.Is(err, api.ErrNoSwarm) {
			return nil, api.ErrNoSwarm
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load the swarm state of %q: %w", repo, err)
	}
	infos, err := m.eng.List(ctx, m.selector(map[string]string{contract.LabelSwarmID: st.SwarmID}))
	if err != nil {
		return nil, fmt.Errorf("list the swarm's containers: %w", err)
	}
	repoID := RepoID(repo)
	if err := m.foreignSwarm(repo, repoID, st.SwarmID, infos); err != nil {
		return nil, err
	}
	sw := m.adoptedSwarm(ctx, repo, repoID, store, st, infos)
	sw.restoreGroups(st)
	byID := map[string]engine.Info{}
	for _, in := range infos {
		byID[in.ID] = in
	}
	facts := make([]entryFacts, 0, len(st.Containers))
	ctrs := map[string]*ctr{}
	for _, e := range st.Containers {
		f, c, err := sw.observe(ctx, e, byID)
		if err != nil {
			sw.close(ctx)
			return nil, err
		}
		facts = append(facts, f)
		if c != nil {
			ctrs[f.name] = c
		}
	}
	sw.linkGroups()
	sw.carryOut(ctx, planAdoption(sw.local, facts), ctrs)
	sw.recoverPicks()
	return sw, nil
}

// adoptedSwarm is the swarm of a state file, with what its containers'
// labels say about it (max containers, git mode, image).
func (m *Manager) adoptedSwarm(ctx context.Context, repo, repoID string, store *state.Store, st *state.Swarm, infos []engine.Info) *swarm {
	sw := &swarm{m: m, id: st.SwarmID, repo: repo, repoID: repoID, max: m.cfg.MaxContainers, image: m.cfg.Image, store: store, network: networkName(st.SwarmID)}
	for _, in := range infos {
		if n, err := strconv.Atoi(in.Labels[contract.LabelMaxContainers]); err == nil && n > 0 {
			sw.max = n
		}
		if in.Labels[contract.LabelGitMode] == "local" {
			sw.local = true
		}
		if in.Image != "" {
			sw.image = in.Image
		}
	}
	if sw.local && m.cfg.Git == nil {
		m.log.Warn("swarm was started in local mode but this daemon has no git service; its pending containers cannot get git access", "repo", repo)
		sw.local = false
	}
	sw.slots = newLimiter(sw.max)
	if !sw.local {
		// Only pending containers need it; a missing origin fails them
		// later, not the adoption.
		sw.repoURL, _ = originURL(ctx, repo)
	}
	sw.led = newLedger(store, &state.Swarm{SwarmID: st.SwarmID, CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt}, m.recorderOptions())
	return sw
}

// observe learns one state entry's facts. An entry of this daemon's is
// tracked (its journal replayed into the ledger) and returned as a ctr;
// one that is not (notMade, foreign) is only described.
func (sw *swarm) observe(ctx context.Context, e *state.Container, byID map[string]engine.Info) (entryFacts, *ctr, error) {
	jpath := sw.store.JournalPath(contract.Sandbox{Swarm: sw.id, Container: e.ContainerName})
	info, found := byID[e.ContainerID]
	f := entryFacts{name: e.ContainerName, journal: fileExists(jpath), found: found, info: info}
	if f.notMade() {
		return f, nil, nil
	}
	info, found, err := sw.entryContainer(ctx, e, info, found)
	if errors.Is(err, errForeign) {
		f.foreign = err.Error()
		return f, nil, nil
	}
	if err != nil {
		return f, nil, err
	}
	f.info, f.found = info, found
	tf, err := loadRecovered(ctx, sw.repo, e.TaskFilePath, e.BranchName, sw.local)
	if err != nil {
		sw.m.log.Warn("task file unreadable; its stories are learnt from the journal", "file", e.TaskFilePath, "err", err)
		tf = nil
	}
	c := &ctr{name: e.ContainerName, taskFile: e.TaskFilePath, branch: e.BranchName, tf: tf, id: cmp.Or(info.ID, e.ContainerID),
		repoURL: sw.repoURL, stopCh: make(chan struct{})}
	// One pass over the journal (at its cap, a million records) for the
	// fold and the view's details.
	t, _, err := state.ReplayJournal(jpath, rerunBase(jpath, tf), func(r state.Record) { sw.restoreDetail(c, r) })
	if err != nil {
		sw.m.log.Warn("journal unreadable; the container's fold starts afresh", "journal", jpath, "err", err)
		t = state.NewTracker(tf)
	}
	if err := sw.led.track(e.Clone(), t); err != nil {
		return f, nil, fmt.Errorf("track %s: %w", e.ContainerName, err)
	}
	sw.ctrs = append(sw.ctrs, c)
	f.status, f.stopAsked = t.Status(), e.Status == state.StatusStopped
	if u := info.Labels[contract.LabelRepoURL]; found && u != "" {
		c.repoURL = u
	}
	// A claimed warm sandbox waits for its claim lines before the
	// task-request, if neither was sent.
	c.warm = found && info.Labels[contract.LabelWarm] != ""
	if found {
		// A finished container is never followed again: this is the only
		// time its node is learnt.
		c.node = info.Node
	}
	if found && !info.Running && info.Status != "created" {
		code := info.ExitCode
		c.exitCode, c.oom = &code, info.OOMKilled
	}
	if f.status.Terminal() && needsPublished(sw.local, f.status) {
		f.published = sw.published(ctx, c)
	}
	return f, c, nil
}

// carryOut does what the plan says: the Manager holds the swarm from here,
// and its supervisors start.
func (sw *swarm) carryOut(ctx context.Context, p adoptPlan, ctrs map[string]*ctr) {
	m := sw.m
	for _, s := range p.steps {
		switch s.action {
		case actLeave:
			m.log.Info("state entry not made by aimid; left as it is", "repo", sw.repo, "container", s.name)
		case actKeep:
			m.log.Warn("state entry names a container this daemon did not make for this swarm; left alone", "repo", sw.repo, "container", s.name, "err", s.why)
			sw.foreign = append(sw.foreign, api.Kept{Name: s.name, Reason: s.why})
		}
		if c := ctrs[s.name]; c != nil && s.stop {
			// Another tool asked for a stop while no daemon watched: the
			// supervisor sees it before it starts or re-attaches.
			c.stopReq = true
			close(c.stopCh)
		}
	}
	if p.network {
		// Containers still running or waiting need the git service on
		// their network's gateway again.
		if err := sw.ensureNetwork(ctx); err != nil {
			m.log.Warn("local mode: git service not reachable for the adopted swarm", "repo", sw.repo, "err", err)
		}
	}
	m.mu.Lock()
	m.swarms[sw.repo] = sw
	m.mu.Unlock()
	for _, s := range p.steps {
		c := ctrs[s.name]
		switch s.action {
		case actFinish:
			sw.finish(m.life, c, *s.facts)
		case actLaunch:
			sw.launch(c, s.mode)
		case actSettle:
			sw.launch(c, modeSettle)
		}
	}
}
