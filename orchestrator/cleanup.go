package orchestrator

import (
	"context"
	"fmt"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
)

// Cleanup removes the repo's terminal containers (and the swarm network when
// unused) and drops their state entries. A container whose branch has
// commits nobody received (unreceived.go; either git mode) is kept unless
// force.
func (m *Manager) Cleanup(ctx context.Context, repoPath string, force bool) (api.CleanupReport, error) {
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.CleanupReport{}, err
	}
	defer unlock()
	repo := sw.repo
	sw.reconcileLive(ctx)
	rep, err := sw.cleanup(ctx, force)
	if err != nil {
		return rep, err
	}
	m.cleanupReplaced(ctx, sw, force, &rep)
	if rep.StateRemoved && sw.local {
		m.forgetGit(ctx, sw.id, &rep)
	}
	if rep.StateRemoved {
		sw.close(ctx)
		m.mu.Lock()
		if m.swarms[repo] == sw {
			delete(m.swarms, repo)
		}
		m.mu.Unlock()
		m.publish(api.Event{SwarmID: sw.id, RepoPath: repo, Kind: api.EventSwarmRemoved})
	}
	return rep, nil
}

// cleanupReplaced removes the exited containers of earlier swarms of the
// repo (replaced by Start, so no longer in the state file), their networks
// and, once none of their containers is left, their journals; one holding
// unreceived commits (either git mode) is kept unless force.
func (m *Manager) cleanupReplaced(ctx context.Context, sw *swarm, force bool, rep *api.CleanupReport) {
	infos, err := m.eng.List(ctx, m.selector(map[string]string{contract.LabelProject: sw.repo}))
	if err != nil {
		m.log.Warn("cleanup: list earlier swarms' containers", "repo", sw.repo, "err", err)
		return
	}
	nets := map[string]bool{}
	left := map[string]bool{}      // earlier swarms with a container still there
	localGone := map[string]bool{} // earlier local-mode swarms that lost a container here
	for _, in := range infos {
		old := in.Labels[contract.LabelSwarmID]
		if old == "" || old == sw.id || !sw.sameRepository(in.Labels) {
			continue
		}
		if in.Running {
			left[old] = true
			continue
		}
		local := in.Labels[contract.LabelGitMode] == "local"
		if !force {
			commits, err := m.unreceived(ctx, sw.repo, holderOf(in))
			if err != nil || len(commits) > 0 {
				why := "container of an earlier swarm holding commit(s) nobody received"
				if err != nil {
					why = "container of an earlier swarm whose work may not have been received (" + err.Error() + ")"
				}
				rep.Kept = append(rep.Kept, api.Kept{Name: in.Name, Reason: why + "; take them with 'aimi swarm fetch " + in.Name + "' or pass --force to remove it", Commits: commits})
				left[old] = true
				continue
			}
		}
		if err := m.eng.Remove(ctx, in.ID); err != nil {
			rep.Kept = append(rep.Kept, api.Kept{Name: in.Name, Reason: "remove failed: " + err.Error()})
			left[old] = true
			continue
		}
		rep.Removed = append(rep.Removed, in.Name)
		nets[networkName(old)] = true
		if local {
			localGone[old] = true
		}
	}
	for n := range nets {
		_ = m.eng.RemoveNetworkIfUnused(ctx, n)
	}
	for id := range localGone {
		if !left[id] {
			m.forgetGit(ctx, id, rep)
		}
	}
	// Journals of replaced swarms with no container left: logs reads only
	// the current swarm's, so these were only disk.
	removed, err := sw.store.RemoveJournals(func(id string) bool { return id == sw.id || left[id] })
	if err != nil {
		m.log.Warn("cleanup: remove earlier swarms' journals", "repo", sw.repo, "err", err)
	}
	if len(removed) > 0 {
		m.log.Info("cleanup: removed the journals of replaced swarms", "repo", sw.repo, "swarms", removed)
	}
}

// forgetGit drops the git service's mirror and grants of a swarm none of
// whose containers is left, so the data dir does not grow by a mirror per
// swarm. When the service keeps them (unpublished commits, or a failure)
// the report says so: the mirror may be the only copy of that work.
func (m *Manager) forgetGit(ctx context.Context, swarmID string, rep *api.CleanupReport) {
	if m.cfg.Git == nil {
		return
	}
	if err := m.cfg.Git.Forget(ctx, swarmID); err != nil {
		m.log.Warn("cleanup: the git service kept the swarm's repository", "swarm", swarmID, "err", err)
		rep.Notes = append(rep.Notes, err.Error())
	}
}

// keepUnreceived reports whether cleanup keeps terminal container c because
// it holds commits nobody received (or it cannot tell), saying why in rep;
// with force it goes anyway, and rep lists what went with it. A forced
// cleanup does not ask origin (remote mode): it must not wait on a network.
func (sw *swarm) keepUnreceived(ctx context.Context, c *ctr, force bool, rep *api.CleanupReport) bool {
	if (force && !sw.local) || !sw.mayHaveCommitted(c) {
		return false
	}
	commits, err := sw.m.unreceived(ctx, sw.repo, sw.holder(c))
	switch {
	case err != nil && !force:
		rep.Kept = append(rep.Kept, api.Kept{Name: c.name, Reason: "cannot tell whether its work was received: " + err.Error() + " (pass --force to remove it anyway)"})
		return true
	case len(commits) > 0 && !force:
		rep.Kept = append(rep.Kept, api.Kept{Name: c.name, Reason: fmt.Sprintf("branch %s has %d commit(s) nobody received; take them with 'aimi swarm fetch %s' or pass --force", c.branch, len(commits), c.name), Commits: commits})
		return true
	case len(commits) > 0:
		rep.Lost = append(rep.Lost, api.Kept{Name: c.name, Reason: "removed with --force", Commits: commits})
	}
	return false
}
