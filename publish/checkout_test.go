package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// fixture: the user's checkout and a source repository (standing in for
// the git service's mirror) cloned from it, where "the container" commits
// on feat.
type fixture struct {
	user, src string
	base      string // main's commit both share
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	user := newRepo(t, false)
	src := filepath.Join(t.TempDir(), "src")
	mustGit(t, "", "clone", "-q", user, src)
	return fixture{user: user, src: src, base: mustGit(t, user, "rev-parse", "HEAD")}
}

// branch is branch of the user's checkout, for IntoCheckout.
func (f fixture) branch(branch string) contract.ContainerBranch {
	return contract.ContainerBranch{Repo: f.user, Branch: branch}
}

// containerWork commits n files on branch feat in the source.
func (f fixture) containerWork(t *testing.T, names ...string) string {
	t.Helper()
	if mustGit(t, f.src, "branch", "--list", "feat") == "" {
		mustGit(t, f.src, "checkout", "-q", "-b", "feat", f.base)
	} else {
		mustGit(t, f.src, "checkout", "-q", "feat")
	}
	var tip string
	for _, n := range names {
		tip = commit(t, f.src, n)
	}
	return tip
}

// intoCheckoutCase is one case of TestIntoCheckout: setup prepares the
// fixture and returns the tip the user's feat must have afterwards.
type intoCheckoutCase struct {
	name    string
	setup   func(t *testing.T, f fixture) (wantTip string)
	action  Action
	wantErr error
	msg     []string // in the error
}

func TestIntoCheckout(t *testing.T) {
	ctx := t.Context()
	for _, tc := range intoCheckoutCases() {
		t.Run(tc.name, func(t *testing.T) { checkIntoCheckout(t, ctx, tc) })
	}
}

// intoCheckoutCases are TestIntoCheckout's cases.
func intoCheckoutCases() []intoCheckoutCase {
	return []intoCheckoutCase{
		{name: "new branch is created", action: Created,
			setup: func(t *testing.T, f fixture) string { return f.containerWork(t, "a.txt") }},
		{name: "branch behind is fast-forwarded", action: FastForwarded,
			setup: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "branch", "feat", f.base)
				return f.containerWork(t, "a.txt", "b.txt")
			}},
		{name: "same commit is up to date", action: UpToDate,
			setup: func(t *testing.T, f fixture) string {
				tip := f.containerWork(t, "a.txt")
				mustGit(t, f.user, "fetch", "-q", f.src, "feat:feat")
				return tip
			}},
		{name: "branch ahead of the container is left alone", action: Contained,
			setup: func(t *testing.T, f fixture) string {
				f.containerWork(t, "a.txt")
				mustGit(t, f.user, "fetch", "-q", f.src, "feat:feat")
				mustGit(t, f.user, "checkout", "-q", "feat")
				ahead := commit(t, f.user, "user.txt")
				mustGit(t, f.user, "checkout", "-q", "main")
				return ahead
			}},
		{name: "diverged branch is not moved and the error says why", wantErr: ErrDiverged,
			msg: []string{"diverged", "neither contains the other", "not moved", "git -C"},
			setup: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "checkout", "-q", "-b", "feat")
				mine := commit(t, f.user, "user.txt")
				mustGit(t, f.user, "checkout", "-q", "main")
				f.containerWork(t, "a.txt")
				return mine
			}},
		{name: "checked-out branch is not moved", wantErr: ErrCheckedOut,
			msg: []string{"checked out", "not moved", "merge"},
			setup: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "checkout", "-q", "-b", "feat")
				f.containerWork(t, "a.txt")
				return f.base
			}},
		{name: "branch checked out in another worktree is not moved", wantErr: ErrCheckedOut,
			msg: []string{"checked out", "wt"},
			setup: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "branch", "feat", f.base)
				mustGit(t, f.user, "worktree", "add", "-q", filepath.Join(t.TempDir(), "wt"), "feat")
				f.containerWork(t, "a.txt")
				return f.base
			}},
		{name: "branch of a locked worktree whose directory is gone is not moved", wantErr: ErrCheckedOut,
			msg: []string{"checked out", "gone"},
			setup: func(t *testing.T, f fixture) string {
				mustGit(t, f.user, "branch", "feat", f.base)
				wt := filepath.Join(t.TempDir(), "gone")
				mustGit(t, f.user, "worktree", "add", "-q", wt, "feat")
				mustGit(t, f.user, "worktree", "lock", wt)
				if err := os.RemoveAll(wt); err != nil {
					t.Fatal(err)
				}
				f.containerWork(t, "a.txt")
				return f.base
			}},
		{name: "container without the branch has nothing", wantErr: ErrNoBranch,
			setup: func(t *testing.T, f fixture) string { return "" }},
	}
}

// checkIntoCheckout publishes the container's feat into the user's
// checkout as tc sets it up and checks the action or error, where feat is
// and that the user's worktree did not change.
func checkIntoCheckout(t *testing.T, ctx context.Context, tc intoCheckoutCase) {
	f := newFixture(t)
	want := tc.setup(t, f)
	res, err := IntoCheckout(ctx, testGit, f.src, f.branch("feat"), "")
	if tc.wantErr != nil {
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("err = %v, want %v", err, tc.wantErr)
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("error %q lacks %q", err, m)
			}
		}
	} else if err != nil {
		t.Fatal(err)
	} else if res.Action != tc.action {
		t.Fatalf("action = %s, want %s", res.Action, tc.action)
	}
	got := ""
	if want != "" {
		got = mustGit(t, f.user, "rev-parse", "refs/heads/feat")
	}
	if got != want {
		t.Fatalf("user's feat = %q, want %q", got, want)
	}
	if mustGit(t, f.user, "status", "--porcelain") != "" {
		t.Fatal("the user's worktree changed")
	}
}

// After a refusal the container's commit is in the checkout, so the
// command the message names works offline.
func TestIntoCheckoutRefusalLeavesTheCommitsFetched(t *testing.T) {
	f := newFixture(t)
	mustGit(t, f.user, "checkout", "-q", "-b", "feat")
	tip := f.containerWork(t, "a.txt")
	_, err := IntoCheckout(t.Context(), testGit, f.src, f.branch("feat"), "")
	if !errors.Is(err, ErrCheckedOut) || !strings.Contains(err.Error(), tip) {
		t.Fatalf("err = %v, want ErrCheckedOut naming %s", err, tip)
	}
	mustGit(t, f.user, "merge", "-q", "--ff-only", tip)
}

func TestIntoCheckoutRefusesBadBranch(t *testing.T) {
	f := newFixture(t)
	for _, b := range []string{"", "-x", "a..b", "a b", "a//b", "a/", "x.lock", "--upload-pack=evil"} {
		if _, err := IntoCheckout(t.Context(), testGit, f.src, f.branch(b), ""); !errors.Is(err, ErrBadBranch) {
			t.Errorf("branch %q: err = %v, want ErrBadBranch", b, err)
		}
	}
}
