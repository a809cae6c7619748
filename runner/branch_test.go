package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/gittest"
)

// twinClones makes a bare repository with main and one other branch, and
// two tip-only clones of main as the runner's clone leaves them.
func twinClones(t *testing.T) (a, b string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	gittest.Git(t, dir, "init", "-q", "-b", "main", src)
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, src, "add", "a.txt")
	gittest.Git(t, src, "commit", "-q", "-m", "one")
	gittest.Git(t, src, "branch", "taken")
	bare := filepath.Join(dir, "bare.git")
	gittest.Git(t, dir, "clone", "-q", "--bare", src, bare)
	a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, ws := range []string{a, b} {
		gittest.Git(t, dir, "clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags", "file://"+bare, ws)
	}
	return a, b
}

// gitState is what git says of a workspace's branch, refs, index and tree.
func gitState(t *testing.T, ws string) string {
	t.Helper()
	return strings.Join([]string{
		gittest.Git(t, ws, "symbolic-ref", "HEAD"),
		gittest.Git(t, ws, "rev-parse", "HEAD"),
		gittest.Git(t, ws, "for-each-ref", "--format=%(refname) %(objectname) %(upstream)"),
		gittest.Git(t, ws, "status", "--porcelain=v2", "--branch"),
		gittest.Git(t, ws, "fsck", "--no-progress"),
	}, "\n")
}

// TestStartBranchIsCheckoutB: the branch the runner writes itself after a
// clone is the one git checkout -b makes (HEAD, refs, upstream, index and
// tree as git reports them), and what it cannot write (a branch that
// exists, a name in the way of another) fails as git checkout -b does.
func TestStartBranchIsCheckoutB(t *testing.T) {
	ctx := context.Background()
	for _, branch := range []string{"feat/new", "plain", "a/b/c-d_e"} {
		t.Run(branch, func(t *testing.T) {
			mine, gits := twinClones(t)
			g := newGit(&Config{Workspace: mine, Env: os.Environ(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err := g.checkout(ctx, branch, false); err != nil {
				t.Fatal(err)
			}
			gittest.Git(t, gits, "checkout", "--quiet", "-b", branch)
			if got, want := gitState(t, mine), gitState(t, gits); got != want {
				t.Errorf("written branch:\n%s\nwant, as git checkout -b:\n%s", got, want)
			}
			if want := gittest.Git(t, gits, "rev-parse", "HEAD"); g.received != want {
				t.Errorf("received %q, want the clone's tip %s", g.received, want)
			}
			// git checkout -b would have logged the branch's creation.
			if _, err := os.Stat(filepath.Join(mine, ".git", "logs", "refs", "heads", filepath.FromSlash(branch))); err == nil {
				t.Error("git checkout -b made the branch: the runner's own write was not taken")
			}
			if _, err := os.Stat(filepath.Join(mine, ".git", "HEAD.lock")); err == nil {
				t.Error("HEAD.lock left behind")
			}
		})
	}
	for _, branch := range []string{"main", "main/sub"} {
		t.Run("refused "+branch, func(t *testing.T) {
			mine, _ := twinClones(t)
			before := gitState(t, mine)
			g := newGit(&Config{Workspace: mine, Env: os.Environ(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			err := g.checkout(ctx, branch, false)
			if err == nil {
				t.Fatalf("checkout of %s succeeded; git checkout -b refuses it", branch)
			}
			if !strings.Contains(err.Error(), "git checkout") {
				t.Errorf("error %q is not git's own", err)
			}
			if after := gitState(t, mine); after != before {
				t.Errorf("a refused branch changed the workspace:\n%s\nwas:\n%s", after, before)
			}
		})
	}
}
