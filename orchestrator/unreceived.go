package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Work a container did is received once it is somewhere other than the
// container: in local mode the swarm's mirror or a ref of the user's
// checkout, in remote mode origin or a ref of the checkout (a keep ref
// under contract.KeptRefPrefix counts: git gc keeps what a ref reaches).
// Every path that removes or replaces a container asks first: cleanup
// keeps a container holding unreceived commits unless forced, and a rerun
// of its task file (resume --retry-failed, or a new start whose container
// takes its name) first takes them to where the rerun starts from, or is
// refused and leaves the container alone (docs/unreceived-work.md).

// ContainerWork reads and takes the commits inside a container, running
// or stopped (package gitserve's Keeper).
type ContainerWork interface {
	// BranchTip is refs/heads/<cb.Branch> in the workspace of container
	// cb.Container, "" when it has none.
	BranchTip(ctx context.Context, cb contract.ContainerBranch) (string, error)
	// NamedByRef reports whether a ref of the repository at repoPath
	// reaches commit tip.
	NamedByRef(ctx context.Context, repoPath, tip string) (bool, error)
	// OnOrigin reports whether origin's branch cb.Branch (the remote
	// origin of the checkout at cb.Repo, asked now) holds commit tip.
	OnOrigin(ctx context.Context, cb contract.ContainerBranch, tip string) (bool, error)
	// Keep fetches the container's branch into the checkout as ref (under
	// contract.KeptRefPrefix) and returns its tip.
	Keep(ctx context.Context, cb contract.ContainerBranch, ref string) (tip string, err error)
	// Push pushes ref of the checkout to origin's branch cb.Branch,
	// fast-forward only.
	Push(ctx context.Context, cb contract.ContainerBranch, ref string) error
	// Drop deletes a keep ref whose commits reached origin.
	Drop(ctx context.Context, repoPath, ref string) error
}

// holder is a container that may hold commits nobody received: one of the
// swarm's, or one of an earlier swarm's found on the engine by its labels.
type holder struct {
	swarmID, name, branch string
	local                 bool
	// What the swarm knows of it (none for one found by its labels): the
	// node it ran on, and whether it reported GIT_PUSH_FAILED with which
	// commits (unpushed.go).
	node       string
	pushFailed bool
	unpushed   []string
}

func (sw *swarm) holder(c *ctr) holder {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return holder{swarmID: sw.id, name: c.name, branch: c.branch, local: sw.local,
		node: c.node, pushFailed: c.pushFailed, unpushed: c.unpushed}
}

// sandbox names h to the git service.
func (h holder) sandbox() contract.Sandbox {
	return contract.Sandbox{Swarm: h.swarmID, Container: h.name}
}

// branchIn is h's branch in the checkout at repo.
func (h holder) branchIn(repo string) contract.ContainerBranch {
	return contract.ContainerBranch{Repo: repo, Swarm: h.swarmID, Container: h.name, Branch: h.branch}
}

func holderOf(in engine.Info) holder {
	return holder{swarmID: in.Labels[contract.LabelSwarmID], name: in.Name, branch: in.Labels[contract.LabelBranch],
		local: in.Labels[contract.LabelGitMode] == "local"}
}

// unreceived lists the commits only h holds (its branch's tip names them),
// for a caller about to remove it. An error means it cannot tell: the
// caller keeps the container unless forced.
func (m *Manager) unreceived(ctx context.Context, repo string, h holder) ([]string, error) {
	if commits, err := m.unreadable(h); err != nil {
		return commits, err
	}
	if h.local {
		if m.cfg.Git == nil {
			return nil, errors.New("it ran in local git mode and this daemon has no git service to ask (git.mode is remote)")
		}
		return m.cfg.Git.Unreceived(ctx, h.branchIn(repo))
	}
	w := m.cfg.Work
	if w == nil {
		return nil, nil // this engine cannot read a container's files
	}
	cb := h.branchIn(repo)
	tip, err := w.BranchTip(ctx, cb)
	if err != nil || tip == "" {
		return nil, err
	}
	if ok, err := w.NamedByRef(ctx, repo, tip); err != nil || ok {
		return nil, err
	}
	if ok, err := w.OnOrigin(ctx, cb, tip); err != nil || ok {
		return nil, err
	}
	return []string{tip}, nil
}

// takeWork runs before h is removed to make room for a rerun of its task
// file, so that the rerun builds on what h did: local mode salvages what
// only h holds into its swarm's mirror and, for a rerun in another swarm
// (newSwarm: its mirror is made from the checkout), publishes h's branch
// into the checkout; remote mode
// keeps it in the checkout under a keep ref and pushes it to origin, where
// the rerun clones from. When that fails the error (api.ErrUnreceivedWork)
// names the commits and the way out, and h must not be removed.
func (m *Manager) takeWork(ctx context.Context, repo string, h holder, newSwarm bool) error {
	if commits, err := m.unreadable(h); err != nil {
		return refuseRerun(h, commits, err)
	}
	if !h.local {
		return m.takeToOrigin(ctx, repo, h)
	}
	commits, err := m.unreceived(ctx, repo, h)
	if err != nil && m.cfg.Work == nil {
		// The engine cannot read a container's files: nothing can be
		// taken, and the container never pushed (or its grant is gone).
		m.log.Warn("rerun: cannot tell whether the replaced container holds unreceived commits; this engine cannot read it", "container", h.name, "err", err)
		return nil
	}
	if err != nil || len(commits) > 0 {
		if _, serr := m.cfg.Git.Salvage(ctx, h.sandbox(), h.branch); serr != nil {
			why := serr
			if err != nil {
				why = fmt.Errorf("%w (and whether it holds unreceived work cannot be told: %v)", serr, err)
			}
			return refuseRerun(h, commits, why)
		}
	}
	// The same swarm's rerun clones its mirror, which has the branch now;
	// a new swarm's mirror is made from the checkout, so the branch must
	// reach the checkout first.
	if !newSwarm || m.cfg.Publisher == nil {
		return nil
	}
	if ok, perr := m.cfg.Publisher.Published(ctx, h.branchIn(repo)); perr == nil && ok {
		return nil
	}
	if _, perr := m.cfg.Publisher.Publish(ctx, h.branchIn(repo)); perr != nil {
		return refuseRerun(h, commits, fmt.Errorf("its branch is in the git service's repository of swarm %s but not in your checkout: %w", h.swarmID, perr))
	}
	return nil
}

// takeToOrigin is takeWork for a remote-mode container.
func (m *Manager) takeToOrigin(ctx context.Context, repo string, h holder) error {
	w := m.cfg.Work
	if w == nil {
		return nil // this engine cannot read a container's files
	}
	cb := h.branchIn(repo)
	tip, err := w.BranchTip(ctx, cb)
	if err != nil {
		return refuseRerun(h, nil, fmt.Errorf("read its branch: %w", err))
	}
	if tip == "" {
		return nil
	}
	on, oerr := w.OnOrigin(ctx, cb, tip)
	if oerr == nil && on {
		return nil
	}
	ref := contract.KeptRef(h.sandbox())
	if _, err := w.Keep(ctx, cb, ref); err != nil {
		return refuseRerun(h, []string{tip}, err)
	}
	if err := w.Push(ctx, cb, ref); err != nil {
		return refuseRerun(h, []string{tip}, fmt.Errorf("origin lacks them and %w; they are kept in your checkout as %s: push them (git push origin %s:refs/heads/%s) or merge them by hand", err, ref, ref, h.branch))
	}
	m.log.Info("rerun: the replaced container's commits were pushed to origin first", "container", h.name, "branch", h.branch, "tip", tip)
	if err := w.Drop(ctx, repo, ref); err != nil {
		m.log.Warn("rerun: keep ref left in the checkout", "ref", ref, "err", err)
	}
	return nil
}

// refuseRerun is the error of a rerun that would replace h while its
// commits are nowhere else.
func refuseRerun(h holder, commits []string, why error) error {
	what := "commits nobody may have received"
	if len(commits) > 0 {
		what = "commit(s) " + strings.Join(commits, ", ") + " that nobody received"
	}
	return fmt.Errorf("%w: container %s holds %s on branch %s, and taking them before the rerun failed: %v. The container is kept and nothing was rerun: take its work with 'aimi swarm fetch %s' (or drop it with 'aimi swarm cleanup --force'), then run again",
		api.ErrUnreceivedWork, h.name, what, h.branch, why, h.name)
}
