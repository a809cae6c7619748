package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// Refusals of IntoCheckout. The returned error wraps one of them and says
// what the user can do; the container's commits are already in the
// checkout's object store by then, named by the keep ref IntoCheckout was
// given, so the commands it names work offline and git gc keeps them.
var (
	// ErrCheckedOut: the branch is checked out in a worktree of the
	// checkout; moving it would change files under the user's feet.
	ErrCheckedOut = errors.New("branch is checked out")
	// ErrBusy: an operation of the user in a worktree of the checkout
	// holds the branch without checking it out (a rebase of it, a rebase
	// that will update it, a bisect started from it); moving it would
	// break or undo that operation.
	ErrBusy = errors.New("branch is in use by an operation in progress")
	// ErrDiverged: the checkout's branch has commits the container's branch
	// lacks and the other way round; moving it would drop the user's commits.
	ErrDiverged = errors.New("branch has diverged")
	// ErrNoBranch: the source repository has no such branch (the container
	// never pushed it).
	ErrNoBranch = errors.New("branch not found in the source repository")
	// ErrBadBranch: the branch name is not one the swarm spec allows.
	ErrBadBranch = errors.New("invalid branch name")
)

// Action is what IntoCheckout did to the branch.
type Action string

// Actions of IntoCheckout.
const (
	Created       Action = "created"        // the branch did not exist in the checkout
	FastForwarded Action = "fast-forwarded" // the checkout's branch was behind
	UpToDate      Action = "up-to-date"     // same commit on both sides
	Contained     Action = "contained"      // the checkout's branch already holds the container's tip
)

// Result says what happened to refs/heads/<Branch> in the checkout.
type Result struct {
	Branch string
	Old    string // the checkout's tip before, "" when the branch was new
	New    string // the checkout's tip after
	Action Action
	// Kept is the ref naming the container's tip after a refusal, ""
	// when nothing was refused or the tip could not be named.
	Kept string
}

// IntoCheckout fetches refs/heads/<branch> of the repository at src into the
// checkout as refs/heads/<branch>, where the checkout is at cb.Repo and the
// branch is cb.Branch (its swarm and container play no part). It creates the branch or
// fast-forwards it; it refuses (ErrCheckedOut, ErrBusy, ErrDiverged) to move
// a branch checked out in any worktree of the checkout, one a rebase or
// bisect in any worktree holds, or one that has diverged. On a refusal the
// container's tip is named by keep (a ref under UnpublishedNamespace, ""
// for none) and the error says why and how to take the commits by hand;
// once the branch holds that tip, keep is deleted again. The update is a
// compare-and-swap against the value it read, so a concurrent commit by the
// user makes it fail instead of being overwritten.
func IntoCheckout(ctx context.Context, g gitcmd.Git, src string, cb contract.ContainerBranch, keep string) (Result, error) {
	return intoCheckoutFrom(ctx, g, src, "refs/heads/"+cb.Branch, cb, keep)
}

// intoCheckoutFrom is IntoCheckout of the source's srcRef (another
// branch than cb.Branch: a picked attempt's) as refs/heads/<cb.Branch>.
func intoCheckoutFrom(ctx context.Context, g gitcmd.Git, src, srcRef string, cb contract.ContainerBranch, keep string) (Result, error) {
	repoPath, branch := cb.Repo, cb.Branch
	res := Result{Branch: branch}
	if err := gitref.CheckBranch(branch); err != nil {
		return res, fmt.Errorf("publish: %w: %w", ErrBadBranch, err)
	}
	if keep != "" {
		if err := checkKeep(keep); err != nil {
			return res, fmt.Errorf("publish %s: %w", branch, err)
		}
	}
	ref := "refs/heads/" + branch
	tip, err := g.RevParse(ctx, src, srcRef)
	if err != nil {
		return res, fmt.Errorf("publish %s: read the branch in %s: %w", branch, src, err)
	}
	if tip == "" {
		return res, fmt.Errorf("publish %s: %w (%s)", branch, ErrNoBranch, src)
	}
	// Objects first, no ref written: the checkout then holds the container's
	// commits whatever is decided below, and the refusal messages can name
	// a commit the user can merge without network or the service.
	if _, err := g.Run(ctx, repoPath, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", src, srcRef); err != nil {
		return res, fmt.Errorf("publish %s: fetch from %s into %s: %w", branch, src, repoPath, err)
	}
	if _, err := g.Run(ctx, repoPath, "cat-file", "-e", tip+"^{commit}"); err != nil {
		return res, fmt.Errorf("publish %s: commit %s missing in %s after the fetch: %w", branch, short(tip), repoPath, err)
	}
	old, err := g.RevParse(ctx, repoPath, ref)
	if err != nil {
		return res, fmt.Errorf("publish %s: read the branch in %s: %w", branch, repoPath, err)
	}
	res.Old, res.New = old, old
	if old == tip {
		res.Action = UpToDate
		dropKept(ctx, g, repoPath, branch, keep)
		return res, nil
	}
	if old != "" {
		contained, err := g.IsAncestor(ctx, repoPath, tip, old)
		if err != nil {
			return res, fmt.Errorf("publish %s: compare commits in %s: %w", branch, repoPath, err)
		}
		if contained {
			res.Action = Contained
			dropKept(ctx, g, repoPath, branch, keep)
			return res, nil
		}
	}
	why, err := refusal(ctx, g, repoPath, branch, old, tip)
	if err != nil {
		return res, err
	}
	if why != nil {
		return res, refuse(ctx, g, repoPath, branch, keep, tip, why, &res)
	}
	// old == "" makes update-ref require that the ref does not exist yet.
	if _, err := g.Run(ctx, repoPath, "update-ref", "-m", "aimi: publish "+branch+" from the swarm's git service", ref, tip, old); err != nil {
		return res, fmt.Errorf("publish %s: update the branch in %s (did it change meanwhile? run again): %w", branch, repoPath, err)
	}
	res.New = tip
	res.Action = FastForwarded
	if old == "" {
		res.Action = Created
	}
	dropKept(ctx, g, repoPath, branch, keep)
	return res, nil
}

// refused is why IntoCheckout does not move a branch: the sentinel, what
// holds the branch (following the sentinel in the message), the worktree
// where the user takes the commits ("" when the user picks one), and when.
type refused struct {
	err    error
	detail string
	where  string
	when   string
}

// refusal decides whether moving refs/heads/<branch> from old to tip
// would change a user's files, operation or commits. The checks run last,
// right before the update, to leave as short a window as there can be.
func refusal(ctx context.Context, g gitcmd.Git, repoPath, branch, old, tip string) (*refused, error) {
	wt, err := checkedOutIn(ctx, g, repoPath, "refs/heads/"+branch)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", branch, err)
	}
	if wt != "" {
		return &refused{err: ErrCheckedOut, detail: " in " + wt, where: wt}, nil
	}
	op, err := busyWith(ctx, g, repoPath, branch)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", branch, err)
	}
	if op != "" {
		return &refused{err: ErrBusy, detail: " (" + op + ")", when: "once it is done, "}, nil
	}
	if old == "" {
		return nil, nil
	}
	ff, err := g.IsAncestor(ctx, repoPath, old, tip)
	if err != nil {
		return nil, fmt.Errorf("publish %s: compare commits in %s: %w", branch, repoPath, err)
	}
	if !ff {
		return &refused{err: ErrDiverged, where: repoPath, detail: fmt.Sprintf(
			": %s has %s, the container has %s, and neither contains the other (moving it would drop commits)",
			repoPath, short(old), short(tip))}, nil
	}
	return nil, nil
}

// refuse names tip as keep and returns the refusal's error: why the branch
// stays, where the container's commits are, and how to take them.
func refuse(ctx context.Context, g gitcmd.Git, repoPath, branch, keep, tip string, r *refused, res *Result) error {
	name, kept := tip, ""
	if keep != "" {
		if err := keepTip(ctx, g, repoPath, branch, keep, tip); err != nil {
			kept = fmt.Sprintf("; the container's commits are fetched (tip %s) but not named: %v", short(tip), err)
		} else {
			res.Kept, name = keep, keep
			kept = fmt.Sprintf("; the container's commits are kept at %s (tip %s), safe from git gc", keep, short(tip))
		}
	} else {
		kept = "; the container's commits are fetched"
	}
	how := fmt.Sprintf("merge them into %s by hand with 'git merge %s' on that branch", branch, name)
	if r.where != "" {
		how = fmt.Sprintf("merge them by hand with 'git -C %s merge %s' on %s", r.where, name, branch)
	}
	return fmt.Errorf("publish %s: %w%s, so the branch is not moved%s: %s%s", branch, r.err, r.detail, kept, r.when, how)
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
