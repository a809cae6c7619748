package orchestrator

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/publish"
)

// TestPushPickNeverForcesOriginsBranch: the picked attempt's branch in
// the daemon's copy becomes origin's task-file branch: created, or
// fast-forwarded; over commits it lacks it is refused (never forced). A
// pick by hand moves origin's branch off the tip it replaces
// (compare-and-swap) and refuses, moving nothing, once somebody moved it.
func TestPushPickNeverForcesOriginsBranch(t *testing.T) {
	ctx := t.Context()
	root, bare, work := bareOriginAndWork(t)
	base := gittest.CommitOn(t, work, "main", map[string]string{"a.txt": "a\n"})
	a1 := gittest.CommitOn(t, work, "feat/x--a1", map[string]string{"a.txt": "attempt 1\n"})
	gittest.Git(t, work, "branch", "feat/x--a2", base)
	a2 := gittest.CommitOn(t, work, "feat/x--a2", map[string]string{"a.txt": "attempt 2\n"})
	gittest.Git(t, work, "push", "-q", "origin", "main", "feat/x--a1", "feat/x--a2")
	o := &originCopy{dir: filepath.Join(root, "copy.git"), url: "file://" + bare}
	if err := o.make(ctx, "", root); err != nil {
		t.Fatal(err)
	}
	if _, err := o.sync(ctx, originGit, "main", "feat/x--a1", "feat/x--a2"); err != nil {
		t.Fatal(err)
	}
	origins := func() string { return gittest.Git(t, bare, "rev-parse", "--verify", "-q", "refs/heads/feat/x") }

	// The daemon's pick: created.
	if err := o.pushPick(ctx, "feat/x--a2", "feat/x", a2, "", ""); err != nil || origins() != a2 {
		t.Fatalf("create: %v; origin's feat/x %s, want %s", err, origins(), a2)
	}
	// Over commits it lacks (attempt 1's): refused, not moved.
	if err := o.pushPick(ctx, "feat/x--a1", "feat/x", a1, a2, ""); err == nil || origins() != a2 {
		t.Fatalf("a daemon's pick over another tip: %v; origin's feat/x %s, want refused at %s", err, origins(), a2)
	}
	// By hand, off attempt 2's tip: moved.
	if err := o.pushPick(ctx, "feat/x--a1", "feat/x", a1, a2, a2); err != nil || origins() != a1 {
		t.Fatalf("pick by hand: %v; origin's feat/x %s, want %s", err, origins(), a1)
	}
	// By hand, but origin's branch is not the tip replaced: refused.
	gittest.Git(t, bare, "update-ref", "refs/heads/feat/x", base)
	err := o.pushPick(ctx, "feat/x--a2", "feat/x", a2, base, a1)
	if !errors.Is(err, publish.ErrMovedSincePick) || origins() != base {
		t.Fatalf("pick by hand over a moved branch: %v; origin's feat/x %s, want ErrMovedSincePick at %s", err, origins(), base)
	}
	// The branch was read before somebody moved it: the lease refuses.
	err = o.pushPick(ctx, "feat/x--a2", "feat/x", a2, a1, a1)
	if err == nil || origins() != base {
		t.Fatalf("pick by hand on a stale read: %v; origin's feat/x %s, want refused at %s", err, origins(), base)
	}
}
