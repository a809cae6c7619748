package publish

import (
	"errors"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestPublishAttempts: two attempts of feat-x are kept at their attempt
// refs; the first is published as feat-x (not as its own branch); a pick
// by hand moves feat-x to the second only off the first's tip, and never
// off a commit of the user's.
func TestPublishAttempts(t *testing.T) {
	ctx := t.Context()
	f := newPublisherFixture(t, "")
	t1 := f.containerPush(t, "aimi-x-a1", "feat-x--a1", "one.txt")
	t2 := f.containerPush(t, "aimi-x-a2", "feat-x--a2", "two.txt", "three.txt")
	cb := func(name, branch string) contract.ContainerBranch {
		return contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: name, Branch: branch}
	}
	for name, want := range map[string]string{"aimi-x-a1": t1, "aimi-x-a2": t2} {
		ref := contract.AttemptRef(contract.Sandbox{Swarm: "s1", Container: name})
		tip, err := f.p.KeepAttempt(ctx, cb(name, "feat-x--a"+name[len(name)-1:]), ref)
		if err != nil || tip != want || mustGit(t, f.user, "rev-parse", ref) != want {
			t.Fatalf("KeepAttempt(%s) = %s, %v; want %s at %s", name, tip, err, want, ref)
		}
	}
	if _, err := f.p.KeepAttempt(ctx, cb("aimi-x-a1", "feat-x--a1"), "refs/heads/feat-x"); err == nil {
		t.Fatal("KeepAttempt wrote a ref outside refs/aimi/attempts/")
	}
	if _, err := f.p.PublishAs(ctx, cb("aimi-x-a1", "feat-x--a1"), "feat-x", ""); err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-x"); got != t1 {
		t.Fatalf("feat-x at %s, want attempt 1's tip %s", got, t1)
	}
	if out := mustGit(t, f.user, "for-each-ref", "refs/heads/feat-x--a1"); out != "" {
		t.Fatal("the attempt's own branch reached the checkout")
	}
	// Without replace, the second attempt diverges: refused, as a publish is.
	if _, err := f.p.PublishAs(ctx, cb("aimi-x-a2", "feat-x--a2"), "feat-x", ""); !errors.Is(err, ErrDiverged) {
		t.Fatalf("PublishAs of a diverged attempt: %v, want ErrDiverged", err)
	}
	if _, err := f.p.PublishAs(ctx, cb("aimi-x-a2", "feat-x--a2"), "feat-x", t1); err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-x"); got != t2 {
		t.Fatalf("after the pick by hand feat-x at %s, want %s", got, t2)
	}
	// Again (a restarted daemon): nothing moves.
	if _, err := f.p.PublishAs(ctx, cb("aimi-x-a2", "feat-x--a2"), "feat-x", t1); err != nil {
		t.Fatal(err)
	}
	// The user commits on feat-x: a pick back to attempt 1 leaves it.
	mustGit(t, f.user, "checkout", "-q", "feat-x")
	mine := commit(t, f.user, "mine.txt")
	mustGit(t, f.user, "checkout", "-q", "main")
	if _, err := f.p.PublishAs(ctx, cb("aimi-x-a1", "feat-x--a1"), "feat-x", t2); !errors.Is(err, ErrMovedSincePick) {
		t.Fatalf("pick over the user's commit: %v, want ErrMovedSincePick", err)
	}
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-x"); got != mine {
		t.Fatalf("feat-x moved off the user's commit to %s", got)
	}
}
