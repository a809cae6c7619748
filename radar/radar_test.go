package radar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// repo is a real repository with a main branch of two files.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("main", map[string]string{"f": "one\ntwo\nthree\n", "g": "g\n", "h": "1\n2\n3\n4\n5\n6\n7\n8\n"})
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	return gittest.Git(r.t, r.dir, args...)
}

// write commits files on branch (made from main when new) and returns
// the new tip.
func (r *repo) write(branch string, files map[string]string) string {
	r.t.Helper()
	return gittest.CommitOn(r.t, r.dir, branch, files)
}

func (r *repo) radar() *Radar {
	return New(gitcmd.Hermetic, r.dir, filepath.Join(r.t.TempDir(), "scratch"))
}

func find(ps []Pair, key string) *Pair {
	for i := range ps {
		if ps[i].Key() == key {
			return &ps[i]
		}
	}
	return nil
}

func pairKey(a, b string) string { return Pair{Containers: []string{a, b}}.Key() }

// Two branches that change the same lines conflict, two that change the
// same file in different places overlap, and one on its own is silent.
func TestConflictOverlapAndNothing(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{
		"a": r.write("a", map[string]string{"f": "one\nTWO-a\nthree\n", "h": "1-a\n2\n3\n4\n5\n6\n7\n8\n"}),
		"b": r.write("b", map[string]string{"f": "one\nTWO-b\nthree\n"}),
		"c": r.write("c", map[string]string{"h": "1\n2\n3\n4\n5\n6\n7\n8-c\n"}),
		"d": r.write("d", map[string]string{"new": "d\n"}),
	}
	rep, err := r.radar().Look(context.Background(), Target{}, tips)
	if err != nil {
		t.Fatal(err)
	}
	if ab := find(rep.Pairs, pairKey("a", "b")); ab == nil || ab.Kind != KindConflict || !slices.Equal(ab.Files, []string{"f"}) {
		t.Errorf("a and b: %+v, want a conflict on f", ab)
	}
	if ac := find(rep.Pairs, pairKey("a", "c")); ac == nil || ac.Kind != KindOverlap || !slices.Equal(ac.Files, []string{"h"}) {
		t.Errorf("a and c: %+v, want an overlap on h", ac)
	}
	if len(rep.Pairs) != 2 || len(rep.Detected) != 2 || len(rep.Cleared) != 0 || rep.Merged != 6 {
		t.Errorf("report %+v, want the two pairs above, both detected, 6 merges", rep)
	}
	if got := rep.Conflicts(); len(got) != 1 || got[0].Key() != pairKey("a", "b") {
		t.Errorf("conflicts %+v, want a and b only", got)
	}
}

// A look merges again only the pairs whose tips moved, and says which
// pairs cleared.
func TestIncrementalAndCleared(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{
		"a": r.write("a", map[string]string{"f": "one\nTWO-a\nthree\n"}),
		"b": r.write("b", map[string]string{"f": "one\nTWO-b\nthree\n"}),
		"c": r.write("c", map[string]string{"g": "g-c\n"}),
	}
	rd := r.radar()
	ctx := context.Background()
	target := Target{Name: "main", Commit: r.git("rev-parse", "main")}
	if rep, err := rd.Look(ctx, target, tips); err != nil || rep.Merged != 6 || len(rep.Detected) != 1 {
		t.Fatalf("first look: %+v %v, want 6 merges and the conflict", rep, err)
	}
	if rep, err := rd.Look(ctx, target, tips); err != nil || rep.Merged != 0 || len(rep.Detected)+len(rep.Cleared) != 0 || len(rep.Pairs) != 1 {
		t.Fatalf("look with nothing moved: %+v %v, want no merge and no change", rep, err)
	}
	tips["b"] = r.write("b", map[string]string{"f": "one\nTWO-a\nthree\n"}) // b takes a's line
	rep, err := rd.Look(ctx, target, tips)
	if err != nil || rep.Merged != 3 {
		t.Fatalf("look after b moved: %+v %v, want 3 merges (b with a, c and main)", rep, err)
	}
	if len(rep.Cleared) != 1 || rep.Cleared[0].Key() != pairKey("a", "b") || rep.Cleared[0].Kind != KindConflict {
		t.Errorf("cleared %+v, want the conflict of a and b", rep.Cleared)
	}
	if ab := find(rep.Pairs, pairKey("a", "b")); ab == nil || ab.Kind != KindOverlap {
		t.Errorf("a and b now: %+v, want an overlap (both changed f the same way)", ab)
	}
	delete(tips, "c")
	if rep, err := rd.Look(ctx, target, tips); err != nil || rep.Merged != 0 || len(rep.Cleared) != 0 {
		t.Errorf("look without c: %+v %v, want nothing merged, nothing cleared", rep, err)
	}
}

// A pair whose files change but not its kind is Changed, not Detected
// again (a notice per new conflict, not per push).
func TestFilesChangedIsNotDetectedAgain(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{
		"a": r.write("a", map[string]string{"f": "one\nTWO-a\nthree\n"}),
		"b": r.write("b", map[string]string{"f": "one\nTWO-b\nthree\n"}),
	}
	rd := r.radar()
	ctx := context.Background()
	if rep, err := rd.Look(ctx, Target{}, tips); err != nil || len(rep.Detected) != 1 {
		t.Fatalf("first look: %+v %v", rep, err)
	}
	tips["a"] = r.write("a", map[string]string{"g": "g-a\n"})
	tips["b"] = r.write("b", map[string]string{"g": "g-b\n"})
	rep, err := rd.Look(ctx, Target{}, tips)
	if err != nil || len(rep.Detected) != 0 || len(rep.Cleared) != 0 || len(rep.Changed) != 1 || !slices.Equal(rep.Changed[0].Files, []string{"f", "g"}) {
		t.Errorf("look after both moved: %+v %v, want the conflict changed to f and g, nothing detected", rep, err)
	}
}

// A branch that would conflict with what has landed on the target since
// it forked is reported against the target.
func TestAgainstTheTarget(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{"a": r.write("a", map[string]string{"f": "one\nTWO-a\nthree\n"})}
	landed := r.write("main", map[string]string{"f": "one\nTWO-main\nthree\n"})
	rep, err := r.radar().Look(context.Background(), Target{Name: "main", Commit: landed}, tips)
	if err != nil {
		t.Fatal(err)
	}
	want := Pair{Containers: []string{"a"}, Onto: "main", Kind: KindConflict, Files: []string{"f"}}
	if len(rep.Pairs) != 1 || !rep.Pairs[0].Same(want) {
		t.Errorf("pairs %+v, want %+v", rep.Pairs, want)
	}
}

// The radar's merges write nothing into the repository it looks at.
func TestMergesLeaveTheRepositoryAsItWas(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{
		"a": r.write("a", map[string]string{"f": "one\nTWO-a\nthree\n", "x": "a\n"}),
		"b": r.write("b", map[string]string{"f": "one\nTWO-b\nthree\n", "y": "b\n"}),
	}
	before := r.git("count-objects", "-v")
	rd := r.radar()
	if _, err := rd.Look(context.Background(), Target{}, tips); err != nil {
		t.Fatal(err)
	}
	if after := r.git("count-objects", "-v"); after != before {
		t.Errorf("the repository's objects changed:\nbefore %s\nafter %s", before, after)
	}
	if _, err := os.Stat(rd.m.scratch); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch %s left after the look: %v", rd.m.scratch, err)
	}
}

// oldGit answers like a git before merge-tree --write-tree.
type oldGit struct{}

func (oldGit) RunEnv(context.Context, string, []string, ...string) (string, error) {
	return "git version 2.37.4", nil
}

func TestOldGitIsRefusedClearly(t *testing.T) {
	_, err := New(oldGit{}, t.TempDir(), t.TempDir()).Look(context.Background(), Target{}, map[string]string{"a": "x"})
	if !errors.Is(err, ErrOldGit) || !strings.Contains(err.Error(), "2.38") {
		t.Errorf("err %v, want ErrOldGit naming 2.38", err)
	}
}

// A branch that adds a file where another adds a directory of the same
// name shares no path with it, yet their merge conflicts: the radar
// reports the pair.
func TestFileAgainstDirectoryIsAConflict(t *testing.T) {
	r := newRepo(t)
	tips := map[string]string{
		"a": r.write("a", map[string]string{"docs": "a file\n"}),
		"b": r.write("b", map[string]string{"docs/guide.md": "a directory\n"}),
		"c": r.write("c", map[string]string{"docsx": "a neighbour, not a clash\n"}),
	}
	rep, err := r.radar().Look(context.Background(), Target{}, tips)
	if err != nil {
		t.Fatal(err)
	}
	ab := find(rep.Pairs, pairKey("a", "b"))
	if ab == nil || ab.Kind != KindConflict || len(ab.Files) == 0 {
		t.Fatalf("a and b: %+v, want a conflict (file docs against directory docs/)", ab)
	}
	if len(rep.Pairs) != 1 {
		t.Errorf("pairs %+v, want a and b only (docsx clashes with neither)", rep.Pairs)
	}
}
