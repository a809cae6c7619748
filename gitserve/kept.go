package gitserve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// Keeper reads and takes the commits inside a container, running or
// stopped, whatever its git mode: what the daemon needs before it removes
// or replaces a container of either mode. In local mode the Service
// (Unreceived, Salvage) is the authority, since the swarm's mirror is where
// the work goes; in remote mode work is received once origin or a ref of
// the user's checkout has it, and a Keeper is all there is (a daemon with
// git.mode remote has no Service).
type Keeper struct {
	Probe TipProbe
	Trees ContainerTrees
	// Scratch is a directory of the daemon's where a container's .git is
	// copied before its commits are fetched out of it (default os.TempDir()).
	Scratch string
}

// originTimeout bounds one conversation with origin (ls-remote, push): it
// runs while the repository's lock is held.
const originTimeout = 2 * time.Minute

// userGit runs git with the user's own configuration, for what needs their
// credentials and remotes (origin); never on a repository of the service's.
var userGit = gitcmd.Git{}

// BranchTip is refs/heads/<cb.Branch> in the workspace of container
// cb.Container, "" when it has none.
func (k Keeper) BranchTip(ctx context.Context, cb contract.ContainerBranch) (string, error) {
	if k.Probe == nil {
		return "", fmt.Errorf("read branch %s of %s: %w", cb.Branch, cb.Container, ErrNoTrees)
	}
	return k.Probe.BranchTip(ctx, cb.Container, cb.Branch)
}

// NamedByRef is the package's NamedByRef: whether a ref of repoPath
// reaches commit tip.
func (k Keeper) NamedByRef(ctx context.Context, repoPath, tip string) (bool, error) {
	return NamedByRef(ctx, repoPath, tip)
}

// OnOrigin reports whether origin's branch cb.Branch, as the remote
// "origin" of the checkout at cb.Repo serves it now (the user's
// credentials), holds commit tip: it is tip, or it descends from it and
// the checkout can tell. A branch origin lacks holds nothing; origin
// unreachable is an error.
func (k Keeper) OnOrigin(ctx context.Context, cb contract.ContainerBranch, tip string) (bool, error) {
	repoPath, branch := cb.Repo, cb.Branch
	if err := gitref.CheckBranch(branch); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, originTimeout)
	defer cancel()
	out, err := userGit.Run(ctx, repoPath, "ls-remote", "--exit-code", "origin", "refs/heads/"+branch)
	var ge *gitcmd.GitError
	if errors.As(err, &ge) && ge.ExitCode() == 2 {
		return false, nil // no such branch on origin
	}
	if err != nil {
		return false, fmt.Errorf("ask origin for branch %s: %w", branch, err)
	}
	theirs, _, _ := strings.Cut(out, "\t")
	if theirs == tip {
		return true, nil
	}
	if !gitref.ValidOID(theirs) {
		return false, fmt.Errorf("origin's branch %s reads %q, not an object id", branch, clip(theirs))
	}
	if _, err := mirrorGit.Run(ctx, repoPath, "cat-file", "-e", theirs+"^{commit}"); err != nil {
		return false, nil // origin moved to commits the checkout has not seen
	}
	_, err = mirrorGit.Run(ctx, repoPath, "merge-base", "--is-ancestor", tip, theirs)
	return err == nil, nil
}

// Keep fetches branch cb.Branch out of container cb.Container (its
// workspace's .git, read through the engine: objects and refs only, never
// its configuration or hooks) into the checkout at cb.Repo as ref, which
// must be under contract.KeptRefPrefix and moves only forward. It returns
// the commit ref names.
func (k Keeper) Keep(ctx context.Context, cb contract.ContainerBranch, ref string) (string, error) {
	repoPath, containerName, branch := cb.Repo, cb.Container, cb.Branch
	if err := gitref.CheckBranch(branch); err != nil {
		return "", fmt.Errorf("keep the work of %s: %w", containerName, err)
	}
	if !strings.HasPrefix(ref, contract.KeptRefPrefix) {
		return "", fmt.Errorf("keep the work of %s: %s is not under %s", containerName, ref, contract.KeptRefPrefix)
	}
	dir, err := copyContainerGit(ctx, k.Trees, containerName, k.Scratch)
	if err != nil {
		return "", fmt.Errorf("keep the work of %s: %w", containerName, err)
	}
	defer os.RemoveAll(dir)
	if _, err := mirrorGit.Run(ctx, repoPath, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", dir, "refs/heads/"+branch+":"+ref); err != nil {
		return "", fmt.Errorf("keep the work of %s: fetch its branch %s into %s as %s: %w", containerName, branch, repoPath, ref, err)
	}
	tip, err := mirrorGit.Run(ctx, repoPath, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil || !gitref.ValidOID(tip) {
		return "", fmt.Errorf("keep the work of %s: read %s after the fetch: %v", containerName, ref, err)
	}
	return tip, nil
}

// Push pushes ref of the checkout at cb.Repo to origin's branch cb.Branch,
// as the user would (their remote "origin" and credentials), fast-forward
// only.
func (k Keeper) Push(ctx context.Context, cb contract.ContainerBranch, ref string) error {
	repoPath, branch := cb.Repo, cb.Branch
	if err := gitref.CheckBranch(branch); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, originTimeout)
	defer cancel()
	if _, err := userGit.Run(ctx, repoPath, "push", "--quiet", "origin", ref+":refs/heads/"+branch); err != nil {
		return fmt.Errorf("push %s to origin's branch %s: %w", ref, branch, err)
	}
	return nil
}

// Drop deletes ref of the checkout, a keep ref whose commits reached
// origin.
func (k Keeper) Drop(ctx context.Context, repoPath, ref string) error {
	if !strings.HasPrefix(ref, contract.KeptRefPrefix) {
		return fmt.Errorf("%s is not under %s", ref, contract.KeptRefPrefix)
	}
	_, err := mirrorGit.Run(ctx, repoPath, "update-ref", "-d", ref)
	return err
}

// copyContainerGit copies the .git of containerName's workspace into a new
// directory under parent (HEAD, refs and objects only, with a bare
// configuration of its own) and returns it; the caller removes it.
func copyContainerGit(ctx context.Context, trees ContainerTrees, containerName, parent string) (string, error) {
	if trees == nil {
		return "", ErrNoTrees
	}
	tmp, err := os.MkdirTemp(parent, ".salvage-")
	if err != nil {
		return "", err
	}
	rc, err := trees.ReadTree(ctx, containerName, path.Join(contract.DefaultWorkspace, ".git"))
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	err = extractGitDir(rc, tmp)
	rc.Close()
	if err == nil {
		// A configuration of the service's own: the container's (filters,
		// hooks, alternates...) stays behind.
		err = os.WriteFile(filepath.Join(tmp, "config"), []byte("[core]\n\trepositoryformatversion = 0\n\tbare = true\n"), 0o600)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}
