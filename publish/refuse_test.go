package publish

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// tryGit runs git and returns its error instead of failing the test: the
// user's operations below stop on purpose (a conflict, a failing exec).
func tryGit(t testing.TB, dir string, args ...string) error {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(testEnv, "GIT_EDITOR=true")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return err
}

// userBranch makes feat in the user's checkout from base with the given
// files committed on it (in a worktree of its own, removed again), and
// gives the container's source the same feat: the container's work then
// fast-forwards the user's branch, the case where moving it looks safe.
func (f fixture) userBranch(t *testing.T, files ...string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "prep")
	mustGit(t, f.user, "worktree", "add", "-q", "-b", "feat", wt, f.base)
	tip := f.base
	for _, n := range files {
		tip = commit(t, wt, n)
	}
	mustGit(t, f.user, "worktree", "remove", wt)
	mustGit(t, f.src, "fetch", "-q", f.user, "feat:feat")
	return tip
}

// A user's operation in progress on the branch (a rebase of either
// backend, a rebase that updates it as part of a stack, a bisect started
// from it, in the main worktree or a linked one): publishing must not move
// the branch under it, the operation must finish as it would have without
// the daemon, and the container's tip must stay named in the checkout.
// userOpCase is one case of
// TestIntoCheckoutDoesNotMoveABranchUnderAUserOperation.
type userOpCase struct {
	name string
	// start begins the operation in a worktree of f.user (dir "" for
	// a linked one it makes) and returns where it runs.
	start func(t *testing.T, f fixture) (dir string)
	// finish ends it the usual way; feat must then be want(mine).
	finish func(t *testing.T, dir string) error
	msg    string
}

func TestIntoCheckoutDoesNotMoveABranchUnderAUserOperation(t *testing.T) {
	for _, tc := range userOpCases() {
		t.Run(tc.name, func(t *testing.T) { checkNotMovedUnderUserOp(t, tc) })
	}
}

// userOpCases are the user's operations a publish must not move feat under.
func userOpCases() []userOpCase {
	return []userOpCase{
		{name: "rebase stopped in a linked worktree, continued", msg: "rebase",
			start: func(t *testing.T, f fixture) string {
				wt := linked(t, f, "feat")
				stopRebase(t, wt, "main")
				return wt
			},
			finish: func(t *testing.T, dir string) error { return tryGit(t, dir, "rebase", "--continue") }},
		{name: "rebase stopped in the main worktree, continued", msg: "rebase",
			start: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "checkout", "-q", "feat")
				stopRebase(t, f.user, "main")
				return f.user
			},
			finish: func(t *testing.T, dir string) error { return tryGit(t, dir, "rebase", "--continue") }},
		{name: "apply-backend rebase stopped at a conflict, aborted", msg: "rebase",
			start: func(t *testing.T, f fixture) string {
				conflictOnMain(t, f)
				wt := linked(t, f, "feat")
				if tryGit(t, wt, "rebase", "--apply", "main") == nil {
					t.Fatal("the rebase did not stop at the conflict")
				}
				return wt
			},
			finish: func(t *testing.T, dir string) error { return tryGit(t, dir, "rebase", "--abort") }},
		{name: "rebase of a stack that updates the branch, aborted", msg: "rebase",
			start: func(t *testing.T, f fixture) string {
				wt := linked(t, f, "feat")
				mustGit(t, wt, "checkout", "-q", "-b", "top")
				commit(t, wt, "top.txt")
				stopRebase(t, wt, "--update-refs", "main")
				return wt
			},
			finish: func(t *testing.T, dir string) error { return tryGit(t, dir, "rebase", "--abort") }},
		{name: "bisect started from the branch, reset", msg: "bisect",
			start: func(t *testing.T, f fixture) string {
				wt := linked(t, f, "feat")
				mustGit(t, wt, "bisect", "start", "feat", f.base)
				return wt
			},
			finish: func(t *testing.T, dir string) error { return tryGit(t, dir, "bisect", "reset") }},
	}
}

// checkNotMovedUnderUserOp publishes the container's feat while tc's
// operation runs: it is refused as busy with the tip named, and the
// operation finishes with the user's commit and without the container's.
func checkNotMovedUnderUserOp(t *testing.T, tc userOpCase) {
	ctx := t.Context()
	f := newFixture(t)
	mine := f.userBranch(t, "u1.txt", "u2.txt")
	dir := tc.start(t, f)
	tip := f.containerWork(t, "a.txt")
	_, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), "refs/aimi/unpublished/s1/feat")
	t.Logf("refusal: %v", err)
	if !errors.Is(err, ErrBusy) {
		t.Errorf("err = %v, want ErrBusy", err)
	}
	for _, m := range []string{tc.msg, "not moved", "refs/aimi/unpublished/s1/feat"} {
		if err != nil && !strings.Contains(err.Error(), m) {
			t.Errorf("error %q lacks %q", err, m)
		}
	}
	if got, _ := testGit.RevParse(ctx, f.user, "refs/aimi/unpublished/s1/feat"); got != tip {
		t.Errorf("the container's tip is not named: refs/aimi/unpublished/s1/feat = %s, want %s", got, tip)
	}
	if err := tc.finish(t, dir); err != nil {
		t.Fatalf("the user's operation could not finish after the publish: %v", err)
	}
	if ok, _ := testGit.IsAncestor(ctx, f.user, mine, "refs/heads/feat"); !ok {
		t.Errorf("feat lost the user's commit %s", mine)
	}
	if ok, _ := testGit.IsAncestor(ctx, f.user, tip, "refs/heads/feat"); ok {
		t.Errorf("feat holds the container's commit: it was moved under the user's operation")
	}
}

// stopRebase starts an interactive rebase in dir that stops before its
// first step, HEAD detached, as one stopped at a conflict or an edit does.
func stopRebase(t *testing.T, dir string, args ...string) {
	t.Helper()
	mustGit(t, dir, append([]string{"-c", "sequence.editor=sed -i 1ibreak", "rebase", "-q", "-i"}, args...)...)
	if _, err := os.Stat(filepath.Join(mustGit(t, dir, "rev-parse", "--absolute-git-dir"), "rebase-merge")); err != nil {
		t.Fatalf("the rebase did not stop: %v", err)
	}
}

// linked adds a worktree of f.user with branch checked out.
func linked(t *testing.T, f fixture, branch string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	mustGit(t, f.user, "worktree", "add", "-q", wt, branch)
	return wt
}

// conflictOnMain commits on the user's main a change to u1.txt that
// conflicts with the one feat made.
func conflictOnMain(t *testing.T, f fixture) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.user, "u1.txt"), []byte("main's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, f.user, "add", "u1.txt")
	mustGit(t, f.user, "commit", "-q", "-m", "main's u1")
}

// A refusal names the container's tip in the checkout: git gc keeps it,
// and a later publish that succeeds drops the name again.
func TestRefusalKeepsTheTipNamedUntilPublished(t *testing.T) {
	ctx := t.Context()
	const keep = "refs/aimi/unpublished/s1/feat"
	for _, refusal := range []error{ErrCheckedOut, ErrDiverged} {
		t.Run(refusal.Error(), func(t *testing.T) {
			f := newFixture(t)
			f.userBranch(t)
			if refusal == ErrCheckedOut {
				mustGit(t, f.user, "checkout", "-q", "feat")
			} else {
				wt := linked(t, f, "feat")
				commit(t, wt, "mine.txt")
				mustGit(t, f.user, "worktree", "remove", wt)
			}
			tip := f.containerWork(t, "a.txt")
			res, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep)
			t.Logf("refusal: %v", err)
			if !errors.Is(err, refusal) || !strings.Contains(err.Error(), keep) {
				t.Fatalf("err = %v, want %v naming %s", err, refusal, keep)
			}
			if res.Kept != keep {
				t.Errorf("Result.Kept = %q, want %q", res.Kept, keep)
			}
			mustGit(t, f.user, "gc", "-q", "--prune=now")
			if got := mustGit(t, f.user, "rev-parse", keep); got != tip {
				t.Fatalf("%s = %s after gc, want %s", keep, got, tip)
			}
			mustGit(t, f.user, "cat-file", "-e", tip+"^{commit}")
			// The same refusal again changes nothing; more work moves the
			// name forward.
			if _, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep); !errors.Is(err, refusal) {
				t.Fatalf("second publish: %v", err)
			}
			tip = f.containerWork(t, "b.txt")
			if _, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep); !errors.Is(err, refusal) {
				t.Fatalf("third publish: %v", err)
			}
			if got := mustGit(t, f.user, "rev-parse", keep); got != tip {
				t.Fatalf("%s = %s after more work, want %s", keep, got, tip)
			}
			// The user takes the work; the next publish finds it there and
			// the name goes.
			if refusal == ErrCheckedOut {
				mustGit(t, f.user, "merge", "-q", "--ff-only", keep)
				mustGit(t, f.user, "checkout", "-q", "main")
			} else {
				wt := linked(t, f, "feat")
				mustGit(t, wt, "merge", "-q", "--no-edit", keep)
			}
			if _, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep); err != nil {
				t.Fatalf("publish after the user merged: %v", err)
			}
			if out := mustGit(t, f.user, "for-each-ref", "refs/aimi/"); out != "" {
				t.Errorf("the name stayed after the work reached the branch: %s", out)
			}
		})
	}
}

// A name already holding other work (not in the new tip, not on the
// branch) is never overwritten: that work would lose its only name.
func TestRefusalNeverOverwritesAnotherUnpublishedTip(t *testing.T) {
	ctx := t.Context()
	const keep = "refs/aimi/unpublished/s1/feat"
	f := newFixture(t)
	f.userBranch(t)
	mustGit(t, f.user, "checkout", "-q", "feat")
	other := f.containerWork(t, "a.txt")
	if _, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep); !errors.Is(err, ErrCheckedOut) {
		t.Fatal(err)
	}
	mustGit(t, f.src, "reset", "-q", "--hard", f.base)
	tip := f.containerWork(t, "b.txt")
	_, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), keep)
	if !errors.Is(err, ErrCheckedOut) || !strings.Contains(err.Error(), short(other)) {
		t.Fatalf("err = %v, want ErrCheckedOut saying %s holds %s", err, keep, short(other))
	}
	if got := mustGit(t, f.user, "rev-parse", keep); got != other {
		t.Fatalf("%s = %s, want the earlier %s kept (new tip %s)", keep, got, other, tip)
	}
}

// Publish names a refused tip per swarm, and Holds counts that name as
// the checkout holding the work.
func TestPublishRefusedKeepsTheTipUnderTheSwarmsName(t *testing.T) {
	ctx := t.Context()
	f := newPublisherFixture(t, "")
	mustGit(t, f.user, "checkout", "-q", "-b", "feat-r")
	tip := f.containerPush(t, "aimi-r", "feat-r", "r.txt")
	_, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-r", Branch: "feat-r"})
	keep := UnpublishedRef(contract.ContainerBranch{Swarm: "s1", Branch: "feat-r"})
	if !errors.Is(err, ErrCheckedOut) || !strings.Contains(err.Error(), keep) {
		t.Fatalf("err = %v, want ErrCheckedOut naming %s", err, keep)
	}
	if got := mustGit(t, f.user, "rev-parse", keep); got != tip {
		t.Fatalf("%s = %s, want %s", keep, got, tip)
	}
	for _, c := range []struct {
		swarm, tip string
		want       bool
	}{{"s1", tip, true}, {"s2", tip, false}, {"s1", strings.Repeat("1", 40), false}} {
		if got, err := Holds(ctx, contract.ContainerBranch{Repo: f.user, Swarm: c.swarm, Container: "aimi-r", Branch: "feat-r"}, c.tip); got != c.want || err != nil {
			t.Errorf("Holds(%s, %s) = %v, %v; want %v", c.swarm, short(c.tip), got, err, c.want)
		}
	}
	if ok, err := f.p.Published(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-r", Branch: "feat-r"}); ok || err != nil {
		t.Errorf("Published = %v, %v; want false: the branch does not hold the work yet", ok, err)
	}
}
