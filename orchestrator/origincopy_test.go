package orchestrator

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// TestOriginCopySyncsAndNeverForcesTheIntegrationBranch: the daemon's
// copy of origin learns origin's default branch, fetches the branches
// asked for that origin has (a missing one is no error), pushes the
// integration branch as a fast-forward only, refusing with the reason
// once origin's moved to commits it lacks, and replaces a land's own
// scratch branch on origin by compare-and-swap.
func TestOriginCopySyncsAndNeverForcesTheIntegrationBranch(t *testing.T) {
	ctx := t.Context()
	root, bare, work := bareOriginAndWork(t)
	gittest.CommitOn(t, work, "main", map[string]string{"a.txt": "a\n"})
	tip := gittest.CommitOn(t, work, "feat/x", map[string]string{"x.txt": "x\n"})
	gittest.Git(t, work, "push", "-q", "origin", "main", "feat/x")

	o := &originCopy{dir: filepath.Join(root, "copy.git"), url: "file://" + bare}
	if err := o.make(ctx, "", root); err != nil {
		t.Fatal(err)
	}
	if o.onto != "main" {
		t.Fatalf("origin's default branch read as %q, want main", o.onto)
	}
	if _, err := o.sync(ctx, originGit, "main", "feat/x", "feat/not-pushed-yet"); err != nil {
		t.Fatal(err)
	}
	if _, got, err := o.Received(contract.Sandbox{}, "feat/x"); err != nil || got != tip {
		t.Fatalf("the copy's feat/x is %q (%v), want %s", got, err, tip)
	}
	if _, got, _ := o.Received(contract.Sandbox{}, "feat/not-pushed-yet"); got != "" {
		t.Fatalf("a branch origin lacks is %q in the copy", got)
	}

	// The integration branch: pushed new, then as a fast-forward.
	gittest.Git(t, o.dir, "update-ref", "refs/heads/aimi/land/s1", tip)
	if err := o.push(ctx, "aimi/land/s1", nil); err != nil {
		t.Fatal(err)
	}
	// Someone else moves it on origin: the next push is refused.
	gittest.Git(t, work, "fetch", "-q", "origin", "aimi/land/s1:aimi/land/s1")
	gittest.CommitOn(t, work, "aimi/land/s1", map[string]string{"theirs.txt": "t\n"})
	gittest.Git(t, work, "push", "-q", "origin", "aimi/land/s1")
	theirs := gittest.Git(t, bare, "rev-parse", "refs/heads/aimi/land/s1")
	gittest.Git(t, o.dir, "update-ref", "refs/heads/aimi/land/s1", gittest.Git(t, o.dir, "rev-parse", "refs/heads/main"))
	err := o.push(ctx, "aimi/land/s1", nil)
	if err == nil || !strings.Contains(pushRefusedHint(err, "aimi/land/s1"), "never force-pushes") {
		t.Fatalf("push over a moved integration branch: %v, want refused as moved", err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "refs/heads/aimi/land/s1"); got != theirs {
		t.Fatalf("origin's integration branch was moved to %s", got)
	}

	// A land's own scratch branch is replaced as origin has it now.
	gittest.Git(t, o.dir, "update-ref", "refs/heads/aimi/land/s1--fix-a", tip)
	if err := o.pushShared(ctx, "aimi/land/s1--fix-a"); err != nil {
		t.Fatal(err)
	}
	base := gittest.Git(t, o.dir, "rev-parse", "refs/heads/main")
	gittest.Git(t, o.dir, "update-ref", "refs/heads/aimi/land/s1--fix-a", base)
	if err := o.pushShared(ctx, "aimi/land/s1--fix-a"); err != nil {
		t.Fatalf("a second attempt's fix-up branch: %v", err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "refs/heads/aimi/land/s1--fix-a"); got != base {
		t.Fatalf("origin's fix-up branch is %s, want %s", got, base)
	}
}

// FuzzOriginAnswers: whatever origin answers to ls-remote, only valid
// object ids of the branches asked for, and a valid branch name for HEAD,
// come out.
func FuzzOriginAnswers(f *testing.F) {
	oid := strings.Repeat("a", 40)
	f.Add("ref: refs/heads/main\tHEAD\n" + oid + "\tHEAD\n")
	f.Add(oid + "\trefs/heads/feat/x\n" + oid + "\trefs/heads/other/feat/x\nzz\trefs/heads/feat/y\n")
	f.Add("ref: refs/heads/..bad\tHEAD\n")
	f.Fuzz(func(t *testing.T, out string) {
		for b, tip := range lsRemoteHeads(out, []string{"feat/x", "feat/y", "main"}) {
			if (b != "feat/x" && b != "feat/y" && b != "main") || len(tip) < 40 {
				t.Fatalf("read %q -> %q", b, tip)
			}
		}
		if head := symrefHead(out); head != "" && gitref.CheckBranch(head) != nil {
			t.Fatalf("HEAD read as %q", head)
		}
	})
}

// bareOriginAndWork makes, under a temp dir root, a bare repository bare
// (origin, default branch main) and a checkout work whose origin it is.
func bareOriginAndWork(t *testing.T) (root, bare, work string) {
	t.Helper()
	root = t.TempDir()
	bare = filepath.Join(root, "origin.git")
	gittest.Git(t, root, "init", "-q", "--bare", "-b", "main", bare)
	work = filepath.Join(root, "work")
	gittest.Git(t, root, "init", "-q", "-b", "main", work)
	gittest.Git(t, work, "remote", "add", "origin", bare)
	return root, bare, work
}
