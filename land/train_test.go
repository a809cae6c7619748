package land

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/internal/gittest"
)

type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("main", map[string]string{"f": "one\ntwo\nthree\n", "g": "g\n"})
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

func (r *repo) train() *Train {
	return &Train{Git: gitcmd.Hermetic, Dir: r.dir, Ref: "refs/heads/aimi/land/abcd1234", Onto: "main"}
}

func (r *repo) branch(name string, files map[string]string) Branch {
	return Branch{Container: "aimi-" + name, TaskFile: ".aimi/tasks/" + name + "-tasks.json", Title: "feat: " + name,
		Stories: []string{"US-001"}, Tip: r.write(name, files)}
}

// Clean branches land one merge commit each, in order, and the
// integration branch holds every branch's commits; the target is
// untouched.
func TestCleanBranchesLandInOrder(t *testing.T) {
	r := newRepo(t)
	main := r.git("rev-parse", "main")
	tr := r.train()
	ctx := context.Background()
	bs := []Branch{r.branch("a", map[string]string{"a": "a\n"}), r.branch("b", map[string]string{"b": "b\n"})}
	for _, b := range bs {
		res, err := tr.Land(ctx, b)
		if err != nil || res.Outcome != Landed || res.Merge == "" {
			t.Fatalf("land %s: %+v %v", b.Container, res, err)
		}
		if got := r.git("rev-parse", res.Merge+"^2"); got != b.Tip {
			t.Errorf("%s's merge's second parent %s, want its tip %s", b.Container, got, b.Tip)
		}
		if msg := r.git("log", "-1", "--format=%B", res.Merge); !strings.HasPrefix(msg, "Land "+b.TaskFile+": "+b.Title) || !strings.Contains(msg, "US-001") {
			t.Errorf("merge message %q", msg)
		}
	}
	if n := r.git("rev-list", "--count", "--first-parent", "main.."+tr.Ref); n != "2" {
		t.Errorf("%s has %s merges, want 2", tr.Ref, n)
	}
	if r.git("rev-parse", "main") != main {
		t.Error("the landing target moved")
	}
}

// A branch that conflicts with what landed is held with its files and
// the train goes on; a fixer's tree lands it as fixed.
func TestConflictIsHeldOrFixed(t *testing.T) {
	r := newRepo(t)
	tr := r.train()
	ctx := context.Background()
	a := r.branch("a", map[string]string{"f": "one\nTWO-a\nthree\n"})
	b := r.branch("b", map[string]string{"f": "one\nTWO-b\nthree\n"})
	c := r.branch("c", map[string]string{"c": "c\n"})
	if res, err := tr.Land(ctx, a); err != nil || res.Outcome != Landed {
		t.Fatalf("a: %+v %v", res, err)
	}
	before := r.git("rev-parse", tr.Ref)
	res, err := tr.Land(ctx, b)
	if err != nil || res.Outcome != Held || !slices.Equal(res.Files, []string{"f"}) || !strings.Contains(res.Reason, "conflicts") {
		t.Fatalf("b: %+v %v, want held for a conflict on f", res, err)
	}
	if r.git("rev-parse", tr.Ref) != before {
		t.Error("a held branch moved the integration branch")
	}
	if res, err := tr.Land(ctx, c); err != nil || res.Outcome != Landed {
		t.Fatalf("c after the held b: %+v %v", res, err)
	}
	tr.Fix = fixWith(r, "f", "one\nTWO-a\nTWO-b\nthree\n")
	res, err = tr.Land(ctx, b)
	if err != nil || res.Outcome != Fixed {
		t.Fatalf("b with a fixer: %+v %v", res, err)
	}
	if got := r.git("show", tr.Ref+":f"); got != "one\nTWO-a\nTWO-b\nthree" {
		t.Errorf("f after the fix %q", got)
	}
}

// fixWith is a fixer that writes body as file on the conflicted tree.
func fixWith(r *repo, file, body string) Fixer {
	return func(ctx context.Context, br Branch, base string, k Conflict) (string, error) {
		idx := filepath.Join(r.t.TempDir(), "index")
		env := append(os.Environ(), "GIT_INDEX_FILE="+idx)
		run := func(stdin string, args ...string) string {
			cmd := exec.Command("git", args...)
			cmd.Dir, cmd.Env, cmd.Stdin = r.dir, env, strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				r.t.Fatalf("git %v: %v\n%s", args, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		run("", "read-tree", k.Tree)
		blob := run(body, "hash-object", "-w", "--stdin")
		run("", "update-index", "--add", "--cacheinfo", "100644,"+blob+","+file)
		return run("", "write-tree"), nil
	}
}

// Landing again after a crash (the branch moved, the outcome not
// recorded) merges nothing twice; a failed check holds the branch.
func TestAgainAfterACrashAndAFailedCheck(t *testing.T) {
	r := newRepo(t)
	tr := r.train()
	ctx := context.Background()
	a := r.branch("a", map[string]string{"a": "a\n"})
	first, err := tr.Land(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tr.Land(ctx, a)
	if err != nil || again.Outcome != Landed || again.Merge != first.Merge || r.git("rev-parse", tr.Ref) != first.Merge {
		t.Fatalf("again: %+v %v, want the first merge (%s) and no new one", again, err, first.Merge)
	}
	tr.Check = func(ctx context.Context, commit string) (bool, string, error) {
		if r.git("rev-parse", commit+"^2") == a.Tip {
			return true, "", nil
		}
		return false, "exit 1: test failed", nil
	}
	b := r.branch("b", map[string]string{"b": "b\n"})
	res, err := tr.Land(ctx, b)
	if err != nil || res.Outcome != Held || res.Verify != "failed" || !strings.Contains(res.Reason, "test failed") {
		t.Fatalf("b failing its check: %+v %v", res, err)
	}
}

// Landing again a branch an earlier land merged (a crash between the
// branch's move and the record) tells its outcome as that land had it,
// from git alone: fixed (with the conflict's files), fixed after a
// failed check, or landed and checked.
func TestAgainTellsTheEarlierOutcome(t *testing.T) {
	r := newRepo(t)
	tr := r.train()
	ctx := context.Background()
	a := r.branch("a", map[string]string{"f": "one\nTWO-a\nthree\n"})
	b := r.branch("b", map[string]string{"f": "one\nTWO-b\nthree\n"})
	c := r.branch("c", map[string]string{"c": "c\n"})
	d := r.branch("d", map[string]string{"d": "d\n"})
	tr.Check = func(ctx context.Context, commit string) (bool, string, error) {
		return r.git("rev-parse", commit+"^2") != c.Tip, "exit 1", nil
	}
	fixConflict, fixCheck := fixWith(r, "f", "one\nTWO-a\nTWO-b\nthree\n"), fixWith(r, "mended", "by the fix-up\n")
	tr.Fix = func(ctx context.Context, br Branch, base string, k Conflict) (string, error) {
		if br.Tip == c.Tip {
			return fixCheck(ctx, br, base, k)
		}
		return fixConflict(ctx, br, base, k)
	}
	first := map[string]Result{}
	for _, br := range []Branch{a, b, c, d} {
		res, err := tr.Land(ctx, br)
		if err != nil {
			t.Fatalf("%s: %v", br.Container, err)
		}
		first[br.Container] = res
	}
	tr.Fix = nil // the fix-ups are not asked again
	for _, br := range []Branch{a, b, c, d} {
		again, err := tr.Land(ctx, br)
		want := first[br.Container]
		if err != nil || again.Outcome != want.Outcome || again.Merge != want.Merge || again.Verify != want.Verify || !slices.Equal(again.Files, want.Files) {
			t.Errorf("%s again: %+v %v, want %+v", br.Container, again, err, want)
		}
	}
	if got := []Outcome{first[a.Container].Outcome, first[b.Container].Outcome, first[c.Container].Outcome, first[d.Container].Outcome}; !slices.Equal(got, []Outcome{Landed, Fixed, Fixed, Landed}) {
		t.Errorf("first outcomes %v", got)
	}
}
