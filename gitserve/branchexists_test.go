package gitserve

import (
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestGrantSaysWhetherTheBranchExists: a grant tells whether the mirror
// holds the container's branch, whether the ref is packed (the mirror's
// clone), loose (a container's push) or absent, so the runner clones the
// right ref without asking the repository first.
func TestGrantSaysWhetherTheBranchExists(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	mustGit(t, repo, "branch", "feat-user")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	grant := func(container, branch string) Grant {
		t.Helper()
		g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-b", Container: container, Branch: branch}, "")
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	check := func(g Grant, want bool, what string) {
		t.Helper()
		if g.BranchExists == nil || *g.BranchExists != want {
			t.Errorf("%s: BranchExists %v, want %t", what, g.BranchExists, want)
		}
	}
	check(grant("aimi-b1", "feat-user"), true, "a branch of the user's (packed in the mirror)")
	g := grant("aimi-b2", "feat-new")
	check(g, false, "a branch nobody made")

	work := filepath.Join(t.TempDir(), "w")
	env := clientEnv(g.CAFile, bearer(g.Token))
	if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	commitFile(t, work, "b2.txt", "b2\n")
	if out, err := gitOut(work, env, "push", "-q", "origin", "HEAD:refs/heads/feat-new"); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	check(grant("aimi-b2", "feat-new"), true, "a branch the container pushed (a loose ref)")
	check(grant("aimi-b3", "feat"), false, "a prefix of no branch")
}
