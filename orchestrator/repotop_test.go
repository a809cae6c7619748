package orchestrator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A remembered top level is never answered once what git decided it from
// changed: the directory's own repository removed (the enclosing one is the
// top now), or core.worktree set in its config.
func TestRememberedTopFollowsChangesToTheRepository(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outer, inner, other := filepath.Join(base, "outer"), filepath.Join(base, "outer", "inner"), filepath.Join(base, "other")
	for _, d := range []string{inner, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(outer, "init", "-q")
	git(inner, "init", "-q")
	var tops repoTops
	ctx := context.Background()
	want := func(step, top string) {
		t.Helper()
		for range 2 { // asked by git, then remembered
			got, err := tops.resolve(ctx, inner)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if got != top {
				t.Fatalf("%s: top of %s is %s, want %s", step, inner, got, top)
			}
		}
	}
	want("own repository", inner)
	git(inner, "config", "core.worktree", other)
	want("core.worktree set", other)
	git(inner, "config", "--unset", "core.worktree")
	want("core.worktree unset", inner)
	if err := os.RemoveAll(filepath.Join(inner, ".git")); err != nil {
		t.Fatal(err)
	}
	want("own repository removed", outer)
}
