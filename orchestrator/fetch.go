package orchestrator

import (
	"context"
	"fmt"
	"slices"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/tasks"
)

// Fetch brings the work of finished containers that nobody received (the
// runner's completion names the commits and this command when its last
// push failed) out of the containers: in local mode the git service
// salvages the container's branch into the swarm's repository and it is
// published into the checkout as a received branch is; in remote mode the
// branch is fetched into the checkout as a keep ref
// (contract.KeptRef) and pushed to origin, the ref dropped once origin has
// it. names selects containers, of the swarm or exited ones of an earlier
// swarm of the repository (which cleanup keeps while they hold such work);
// none means every finished container of the swarm. Containers with
// nothing unreceived are skipped, saying so.
func (m *Manager) Fetch(ctx context.Context, repoPath string, names []string) (api.FetchReport, error) {
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.FetchReport{}, err
	}
	defer unlock()
	rep := api.FetchReport{RepoPath: sw.repo, Fetched: []api.Fetched{}, Skipped: []api.Kept{}}
	earlier, err := sw.earlierHolders(ctx, names)
	if err != nil {
		return rep, err
	}
	for _, c := range sw.list() {
		if len(names) > 0 && !slices.Contains(names, c.name) {
			continue
		}
		if st := sw.led.status(c.name); !st.Terminal() {
			rep.Skipped = append(rep.Skipped, api.Kept{Name: c.name, Reason: fmt.Sprintf("still %s; fetch it once it has finished", st)})
			continue
		}
		sw.mu.Lock()
		done := c.done
		sw.mu.Unlock()
		if sw.supervised(c) {
			// Terminal by its message; the daemon's follow-up (exit,
			// publish) takes a moment more.
			select {
			case <-done:
			case <-ctx.Done():
				return rep, ctx.Err()
			}
		}
		if !sw.mayHaveCommitted(c) {
			rep.Skipped = append(rep.Skipped, api.Kept{Name: c.name, Reason: "nothing to fetch: no story of it completed, so it made no commit"})
			continue
		}
		m.fetchOne(ctx, sw.repo, sw.holder(c), &rep, func(err error) {
			sw.notePublishFailed(ctx, c, err, m.log.With("swarm", sw.id, "container", c.name))
		})
	}
	for _, h := range earlier {
		m.fetchOne(ctx, sw.repo, h, &rep, nil)
	}
	return rep, nil
}

// mayHaveCommitted reports whether a container's branch may hold commits:
// the runner commits onto the branch only when a story completes (a story
// stopped or failed half-way leaves nothing on it), so a container none of
// whose stories completed has nothing anyone could lose. This is what
// tells, without reading the container (which Swarm mode cannot), that a
// container stopped before its first push holds no work.
func (sw *swarm) mayHaveCommitted(c *ctr) bool {
	for _, s := range sw.led.stories(c.name) {
		if s == tasks.Completed {
			return true
		}
	}
	return false
}

// earlierHolders finds the names that are not the swarm's among the
// exited containers of earlier swarms of the repository (this daemon's);
// a name found in neither is api.ErrUnknownContainer.
func (sw *swarm) earlierHolders(ctx context.Context, names []string) ([]holder, error) {
	var missing []string
	for _, n := range names {
		if sw.find(n) == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	infos, err := sw.m.eng.List(ctx, sw.m.selector(map[string]string{contract.LabelProject: sw.repo}))
	if err != nil {
		return nil, fmt.Errorf("list the repository's containers: %w", err)
	}
	var hs []holder
	for _, n := range missing {
		i := slices.IndexFunc(infos, func(in engine.Info) bool { return in.Name == n && in.Labels[contract.LabelSwarmID] != sw.id })
		if i < 0 {
			return nil, fmt.Errorf("%w: %q", api.ErrUnknownContainer, n)
		}
		if infos[i].Running {
			return nil, fmt.Errorf("%w: %q still runs; stop it first", api.ErrInvalidRequest, n)
		}
		hs = append(hs, holderOf(infos[i]))
	}
	return hs, nil
}

// fetchOne takes what only h holds to where it is received, and reports;
// refused, when set, journals a publish the checkout refused.
func (m *Manager) fetchOne(ctx context.Context, repo string, h holder, rep *api.FetchReport, refused func(error)) {
	skip := func(why string, commits []string) {
		rep.Skipped = append(rep.Skipped, api.Kept{Name: h.name, Reason: why, Commits: commits})
	}
	if commits, err := m.unreadable(h); err != nil {
		skip(err.Error(), commits)
		return
	}
	if h.local && m.cfg.Git == nil {
		skip("it ran in local git mode and this daemon has no git service (git.mode is remote)", nil)
		return
	}
	if !h.local && m.cfg.Work == nil {
		skip("this engine cannot read a container's files", nil)
		return
	}
	commits, err := m.unreceived(ctx, repo, h)
	switch {
	case err != nil:
		// Nothing received and no way to tell: try the container.
		m.log.Info("fetch: cannot tell what is unreceived; reading the container", "container", h.name, "err", err)
	case len(commits) == 0 && h.local:
		skip("nothing to fetch: the git service has its branch "+h.branch, nil)
		return
	case len(commits) == 0:
		skip("nothing to fetch: origin or a ref of your checkout has its branch "+h.branch, nil)
		return
	}
	if !h.local {
		m.fetchToOrigin(ctx, repo, h, commits, rep)
		return
	}
	tip, err := m.cfg.Git.Salvage(ctx, h.sandbox(), h.branch)
	if err != nil {
		skip(err.Error(), commits)
		return
	}
	f := api.Fetched{Name: h.name, Branch: h.branch, Tip: tip}
	if m.cfg.Publisher != nil {
		u, err := m.cfg.Publisher.Publish(ctx, h.branchIn(repo))
		if err != nil {
			if refused != nil {
				refused(err)
			}
			skip(fmt.Sprintf("salvaged into the git service's repository (tip %s) but not into your checkout: %v", tip, err), commits)
			return
		}
		f.PRURL = u
	}
	rep.Fetched = append(rep.Fetched, f)
}

// fetchToOrigin is fetchOne for a remote-mode container: the branch is
// kept in the checkout, then pushed to origin.
func (m *Manager) fetchToOrigin(ctx context.Context, repo string, h holder, commits []string, rep *api.FetchReport) {
	w := m.cfg.Work
	cb, ref := h.branchIn(repo), contract.KeptRef(h.sandbox())
	tip, err := w.Keep(ctx, cb, ref)
	if err != nil {
		rep.Skipped = append(rep.Skipped, api.Kept{Name: h.name, Reason: err.Error(), Commits: commits})
		return
	}
	f := api.Fetched{Name: h.name, Branch: h.branch, Tip: tip, Ref: ref}
	if err := w.Push(ctx, cb, ref); err != nil {
		f.Note = fmt.Sprintf("not on origin: %v; push it with 'git push origin %s:refs/heads/%s' or merge it", err, ref, h.branch)
	} else {
		f.Note = "pushed to origin's branch " + h.branch
		if err := w.Drop(ctx, repo, ref); err != nil {
			m.log.Warn("fetch: keep ref left in the checkout", "ref", ref, "err", err)
		} else {
			f.Ref = ""
		}
	}
	rep.Fetched = append(rep.Fetched, f)
}
