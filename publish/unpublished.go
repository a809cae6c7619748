package publish

import (
	"context"
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// UnpublishedNamespace holds, in the user's checkout, the tips of
// branches a publish refused to move (checked out, being rebased or
// bisected, diverged): a ref names them, so git gc keeps the commits and
// the user merges them by that name. Not under refs/heads: no branch
// appears that the user did not make, and no tool pushes it by accident.
const UnpublishedNamespace = "refs/aimi/unpublished/"

// UnpublishedRef is the ref naming the tip of cb's branch after a refused
// publish: refs/aimi/unpublished/<swarm id>/<branch> (cb's repository and
// container play no part). One per swarm and branch: within a swarm a
// branch only moves forward (the git service refuses other pushes), so a
// later refusal moves the name forward and never drops earlier work;
// another swarm's refusal of the same branch gets a name of its own.
func UnpublishedRef(cb contract.ContainerBranch) string {
	return UnpublishedNamespace + cb.Swarm + "/" + cb.Branch
}

// Holds reports whether the checkout at cb.Repo names tip: it is
// contained in refs/heads/<cb.Branch>, or in UnpublishedRef(cb) where a
// refused publish left it. Work a checkout holds this way survives git gc
// and the removal of the container and the git service's copy.
func Holds(ctx context.Context, cb contract.ContainerBranch, tip string) (bool, error) {
	repoPath := cb.Repo
	for _, ref := range []string{"refs/heads/" + cb.Branch, UnpublishedRef(cb)} {
		at, err := receivedGit.RevParse(ctx, repoPath, ref)
		if err != nil {
			return false, fmt.Errorf("read %s in %s: %w", ref, repoPath, err)
		}
		if at == "" {
			continue
		}
		ok, err := receivedGit.IsAncestor(ctx, repoPath, tip, at)
		if err != nil {
			// tip unknown to the checkout: not held there.
			if _, e := receivedGit.Run(ctx, repoPath, "cat-file", "-e", tip+"^{commit}"); e != nil {
				return false, nil
			}
			return false, fmt.Errorf("compare %s with %s in %s: %w", short(tip), ref, repoPath, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// checkKeep accepts a ref IntoCheckout may write: one under
// UnpublishedNamespace that git accepts.
func checkKeep(keep string) error {
	if !strings.HasPrefix(keep, UnpublishedNamespace) {
		return fmt.Errorf("ref %q is not under %s", keep, UnpublishedNamespace)
	}
	return gitref.CheckRefFormat(keep)
}

// keepTip names tip as keep in repoPath. An existing keep is moved only
// forward, or away from work refs/heads/<branch> already holds: never is
// other work left without a name. The update is a compare-and-swap.
func keepTip(ctx context.Context, g gitcmd.Git, repoPath, branch, keep, tip string) error {
	cur, err := g.RevParse(ctx, repoPath, keep)
	if err != nil {
		return fmt.Errorf("read %s: %w", keep, err)
	}
	if cur == tip {
		return nil
	}
	if cur != "" {
		ahead, err := g.IsAncestor(ctx, repoPath, cur, tip)
		if err != nil {
			return fmt.Errorf("compare %s with the container's tip: %w", keep, err)
		}
		onBranch, err := g.IsAncestor(ctx, repoPath, cur, "refs/heads/"+branch)
		if err != nil {
			onBranch = false // no such branch: not held there
		}
		if !ahead && !onBranch {
			return fmt.Errorf("%s already names other unpublished work (%s), which neither the container's tip nor %s holds; it is left as it is (merge it, or delete it with 'git update-ref -d %s')",
				keep, short(cur), branch, keep)
		}
	}
	if _, err := g.Run(ctx, repoPath, "update-ref", "-m", "aimi: keep the unpublished tip of "+branch, keep, tip, cur); err != nil {
		return fmt.Errorf("write %s: %w", keep, err)
	}
	return nil
}

// dropKept deletes keep once refs/heads/<branch> holds what it names: the
// work is published, the extra name would only clutter. Failing that is
// harmless (the name stays), so it is not an error of the publish.
func dropKept(ctx context.Context, g gitcmd.Git, repoPath, branch, keep string) {
	if keep == "" {
		return
	}
	cur, err := g.RevParse(ctx, repoPath, keep)
	if err != nil || cur == "" {
		return
	}
	if ok, err := g.IsAncestor(ctx, repoPath, cur, "refs/heads/"+branch); err != nil || !ok {
		return
	}
	_, _ = g.Run(ctx, repoPath, "update-ref", "-d", keep, cur)
}
