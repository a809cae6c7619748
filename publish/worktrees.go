package publish

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// checkedOutIn returns the worktree of repoPath that has ref checked out,
// or "" when none has. Locked and prunable worktrees are listed too: a
// worktree on a disk that is not mounted still has its branch.
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

// worktreeDir is one worktree's private git directory (where HEAD,
// rebase-merge and BISECT_START live) and the worktree it belongs to.
type worktreeDir struct {
	gitDir, path string
}

// worktreeDirs lists the git directories of every worktree of repoPath:
// the main one (the common directory) and each linked one under
// <common>/worktrees, whether or not its files are still there.
func worktreeDirs(ctx context.Context, g gitcmd.Git, repoPath string) ([]worktreeDir, error) {
	common, err := g.Run(ctx, repoPath, "rev-parse", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("find the git directory of %s: %w", repoPath, err)
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(repoPath, common)
	}
	main := common
	if filepath.Base(common) == ".git" {
		main = filepath.Dir(common)
	}
	dirs := []worktreeDir{{gitDir: common, path: main}}
	entries, err := os.ReadDir(filepath.Join(common, "worktrees"))
	if errors.Is(err, fs.ErrNotExist) {
		return dirs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the linked worktrees of %s: %w", repoPath, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := worktreeDir{gitDir: filepath.Join(common, "worktrees", e.Name())}
		// gitdir names the worktree's .git file; without it the
		// directory itself is the best name there is.
		d.path = d.gitDir
		if b, err := readSmall(filepath.Join(d.gitDir, "gitdir")); err == nil && len(bytes.TrimSpace(b)) > 0 {
			d.path = filepath.Dir(strings.TrimSpace(string(b)))
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// busyWith says which operation of the user in a worktree of repoPath
// holds branch without checking it out, so that moving the branch would
// break or undo it: a rebase of it (HEAD is detached until the rebase
// writes the branch back, with a compare-and-swap that then fails, and
// --abort puts the old commit back), a rebase of a stack that will update
// it (--update-refs), or a bisect started from it (bisect reset returns
// to it). These are the states in which git's own 'git branch -f' refuses.
// "" when there is none.
func busyWith(ctx context.Context, g gitcmd.Git, repoPath, branch string) (string, error) {
	dirs, err := worktreeDirs(ctx, g, repoPath)
	if err != nil {
		return "", err
	}
	ref := "refs/heads/" + branch
	for _, d := range dirs {
		for _, rb := range []string{"rebase-merge", "rebase-apply"} {
			if firstLine(filepath.Join(d.gitDir, rb, "head-name")) == ref {
				return fmt.Sprintf("a rebase of %s in %s", branch, d.path), nil
			}
		}
		if b, err := readSmall(filepath.Join(d.gitDir, "rebase-merge", "update-refs")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.TrimSpace(line) == ref {
					return fmt.Sprintf("a rebase in %s that will update %s (--update-refs)", d.path, branch), nil
				}
			}
		}
		if firstLine(filepath.Join(d.gitDir, "BISECT_START")) == branch {
			return fmt.Sprintf("a bisect started from %s in %s", branch, d.path), nil
		}
	}
	return "", nil
}

// maxStateFile bounds what is read of a git state file: a branch name or
// the list of a rebase's refs, never more.
const maxStateFile = 1 << 20

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxStateFile))
}

// firstLine is the file's first line without surrounding space, or "".
func firstLine(path string) string {
	b, err := readSmall(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}
