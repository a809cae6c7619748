package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Cleanup removes the repo's terminal containers (and the swarm network when
// unused) and drops their state entries. A container whose branch has
// commits nobody received (unreceived.go; either git mode) is kept unless
// force. A forced cleanup is bounded as a whole by CleanupWait: past it,
// what is not removed yet is left (the state keeps it) and the error names
// it.
func (m *Manager) Cleanup(ctx context.Context, repoPath string, force bool) (api.CleanupReport, error) {
	if force {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.CleanupWait)
		defer cancel()
	}
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.CleanupReport{}, m.cleanupLate(ctx, api.CleanupReport{}, err)
	}
	defer unlock()
	repo := sw.repo
	sw.reconcileLive(ctx)
	rep, err := sw.cleanup(ctx, force)
	if err != nil {
		return rep, m.cleanupLate(ctx, rep, err)
	}
	m.cleanupReplaced(ctx, sw, force, &rep)
	if err := m.cleanupLate(ctx, rep, nil); err != nil {
		return rep, err
	}
	if rep.StateRemoved && sw.local {
		m.forgetGit(ctx, sw.id, &rep)
	}
	if rep.StateRemoved {
		m.forgetOrigin(sw)
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

// stateWriteWait bounds the state file's update after a cleanup's
// removals, which runs even when the cleanup's own time ran out.
const stateWriteWait = 30 * time.Second

// cleanupLate is the error of a forced cleanup whose time ran out (nil
// when it did not): what it removed and what it left, and what to do.
func (m *Manager) cleanupLate(ctx context.Context, rep api.CleanupReport, err error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	left := make([]string, 0, len(rep.Kept))
	for _, k := range rep.Kept {
		left = append(left, k.Name+" ("+k.Reason+")")
	}
	what := "nothing was removed"
	if len(rep.Removed) > 0 {
		what = "removed " + strings.Join(rep.Removed, ", ")
	}
	if len(left) > 0 {
		what += "; left " + strings.Join(left, "; ")
	}
	if err != nil {
		what += "; " + err.Error()
	}
	return fmt.Errorf("cleanup --force did not finish within %s (the engine is slow or not answering): %s. Run it again; what is left stays in the state file",
		m.cfg.CleanupWait, what)
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
		dir := m.netDirOf(in.ID)
		if err := m.eng.Remove(ctx, in.ID); err != nil && !errors.Is(err, engine.ErrLeftOnNode) {
			rep.Kept = append(rep.Kept, api.Kept{Name: in.Name, Reason: "remove failed: " + err.Error()})
			left[old] = true
			continue
		} else if err != nil {
			rep.Notes = append(rep.Notes, err.Error())
		}
		m.forgetNet(contract.Sandbox{Swarm: in.Labels[contract.LabelSwarmID], Container: in.Name}, dir)
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
	h := sw.holder(c)
	if commits, err := sw.m.unreadable(h); err != nil {
		if !force {
			rep.Kept = append(rep.Kept, api.Kept{Name: c.name, Reason: err.Error(), Commits: commits})
			return true
		}
		rep.Lost = append(rep.Lost, api.Kept{Name: c.name, Reason: "removed with --force; its last push never arrived and this backend cannot read it", Commits: commits})
		return false
	}
	if (force && !sw.local) || !sw.mayHaveCommitted(c) {
		return false
	}
	commits, err := sw.m.unreceived(ctx, sw.repo, h)
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
