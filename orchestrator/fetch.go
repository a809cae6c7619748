package orchestrator

import (
	"context"
	"fmt"
	"slices"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/tasks"
)

// Fetch brings the work of finished containers whose last push never
// arrived (the runner's completion names the commits and this command) out
// of the containers into the checkout: the git service salvages the
// container's branch into the swarm's repository, then it is published as
// a received branch is. names selects containers; none means every
// finished one. Containers with nothing unreceived are skipped, saying so.
func (m *Manager) Fetch(ctx context.Context, repoPath string, names []string) (api.FetchReport, error) {
	sw, unlock, err := m.lockedSwarm(ctx, repoPath)
	if err != nil {
		return api.FetchReport{}, err
	}
	defer unlock()
	rep := api.FetchReport{RepoPath: sw.repo, Fetched: []api.Fetched{}, Skipped: []api.Kept{}}
	for _, n := range names {
		if sw.find(n) == nil {
			return rep, fmt.Errorf("%w: %q", api.ErrUnknownContainer, n)
		}
	}
	if !sw.local || m.cfg.Git == nil {
		return rep, fmt.Errorf("%w: the swarm runs in remote mode: its containers push to origin, there is nothing of the daemon's to fetch into", api.ErrInvalidRequest)
	}
	for _, c := range sw.list() {
		if len(names) > 0 && !slices.Contains(names, c.name) {
			continue
		}
		skip := func(why string, commits []string) {
			rep.Skipped = append(rep.Skipped, api.Kept{Name: c.name, Reason: why, Commits: commits})
		}
		if st := sw.led.status(c.name); !st.Terminal() {
			skip(fmt.Sprintf("still %s; fetch it once it has finished", st), nil)
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
			skip("nothing to fetch: no story of it completed, so it made no commit", nil)
			continue
		}
		commits, err := m.cfg.Git.Unreceived(ctx, sw.repo, sw.id, c.name, c.branch)
		switch {
		case err != nil:
			// Nothing received and no way to tell: try the container.
			m.log.Info("fetch: cannot tell what the service lacks; reading the container", "container", c.name, "err", err)
		case len(commits) == 0:
			skip("nothing to fetch: the git service has its branch "+c.branch, nil)
			continue
		}
		tip, err := m.cfg.Git.Salvage(ctx, sw.id, c.name, c.branch)
		if err != nil {
			skip(err.Error(), commits)
			continue
		}
		f := api.Fetched{Name: c.name, Branch: c.branch, Tip: tip}
		if m.cfg.Publisher != nil {
			u, err := m.cfg.Publisher.Publish(ctx, sw.repo, sw.id, c.branch, c.name)
			if err != nil {
				sw.notePublishFailed(ctx, c, err, m.log.With("swarm", sw.id, "container", c.name))
				skip(fmt.Sprintf("salvaged into the git service's repository (tip %s) but not into your checkout: %v", tip, err), commits)
				continue
			}
			f.PRURL = u
		}
		rep.Fetched = append(rep.Fetched, f)
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
