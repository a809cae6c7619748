package publish

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// Refusals of IntoCheckout. The returned error wraps one of them and says
// what the user can do; the container's commits are already in the
// checkout's object store by then, so the commands it names work offline.
var (
	// ErrCheckedOut: the branch is checked out in a worktree of the
	// checkout; moving it would change files under the user's feet.
	ErrCheckedOut = errors.New("branch is checked out")
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
}

// IntoCheckout fetches refs/heads/<branch> of the repository at src into the
// checkout at repoPath as refs/heads/<branch>. It creates the branch or
// fast-forwards it; it refuses (ErrCheckedOut, ErrDiverged) to move a branch
// checked out in any worktree of the checkout or one that has diverged, and
// the error says why and how to take the commits by hand. The update is a
// compare-and-swap against the value it read, so a concurrent commit by the
// user makes it fail instead of being overwritten.
func IntoCheckout(ctx context.Context, g gitcmd.Git, repoPath, src, branch string) (Result, error) {
	res := Result{Branch: branch}
	if err := gitref.CheckBranch(branch); err != nil {
		return res, fmt.Errorf("publish: %w: %w", ErrBadBranch, err)
	}
	ref := "refs/heads/" + branch
	tip, err := g.RevParse(ctx, src, ref)
	if err != nil {
		return res, fmt.Errorf("publish %s: read the branch in %s: %w", branch, src, err)
	}
	if tip == "" {
		return res, fmt.Errorf("publish %s: %w (%s)", branch, ErrNoBranch, src)
	}
	// Objects first, no ref written: the checkout then holds the container's
	// commits whatever is decided below, and the refusal messages can name
	// a commit the user can merge without network or the service.
	if _, err := g.Run(ctx, repoPath, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", src, ref); err != nil {
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
		return res, nil
	}
	if old != "" {
		contained, err := g.IsAncestor(ctx, repoPath, tip, old)
		if err != nil {
			return res, fmt.Errorf("publish %s: compare commits in %s: %w", branch, repoPath, err)
		}
		if contained {
			res.Action = Contained
			return res, nil
		}
	}
	wt, err := checkedOutIn(ctx, g, repoPath, ref)
	if err != nil {
		return res, err
	}
	if wt != "" {
		return res, fmt.Errorf("publish %s: %w in %s, so it is not moved; the container's commits are fetched: take them with 'git -C %s merge %s'",
			branch, ErrCheckedOut, wt, wt, tip)
	}
	if old != "" {
		ff, err := g.IsAncestor(ctx, repoPath, old, tip)
		if err != nil {
			return res, fmt.Errorf("publish %s: compare commits in %s: %w", branch, repoPath, err)
		}
		if !ff {
			return res, fmt.Errorf("publish %s: %w: %s has %s, the container has %s, and neither contains the other; the branch is not moved (that would drop commits): merge by hand with 'git -C %s merge %s' on that branch",
				branch, ErrDiverged, repoPath, short(old), short(tip), repoPath, tip)
		}
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
	return res, nil
}

// checkedOutIn returns the worktree of repoPath that has ref checked out,
// or "" when none has.
func checkedOutIn(ctx context.Context, g gitcmd.Git, repoPath, ref string) (string, error) {
	out, err := g.Run(ctx, repoPath, "worktree", "list", "--porcelain")
	if err != nil {
		return "", fmt.Errorf("list the worktrees of %s: %w", repoPath, err)
	}
	var wt string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			wt = filepath.Clean(p)
		}
		if line == "branch "+ref {
			return wt, nil
		}
	}
	return "", nil
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
