package gitserve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// pushFixture: a user checkout and a service listening on 127.0.0.1.
type pushFixture struct {
	s    *Service
	user string
}

func newPushFixture(t *testing.T) pushFixture {
	t.Helper()
	s, _ := newService(t, Options{})
	if err := s.ListenOn(t.Context(), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return pushFixture{s: s, user: newRepo(t)}
}

// containerPush plays a container: grant, clone over https, commit the
// files on its branch, push. It returns the pushed tip.
func (f pushFixture) containerPush(t *testing.T, name, branch string, files ...string) string {
	t.Helper()
	g, err := f.s.Grant(t.Context(), contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: name, Branch: branch}, "")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), name)
	env := clientEnv(g.CAFile, bearer(g.Token))
	if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	mustGit(t, work, "checkout", "-q", "-b", branch)
	var tip string
	for _, f := range files {
		tip = commitFile(t, work, f, f+"\n")
	}
	if out, err := gitOut(work, env, "push", "-q", "origin", "HEAD:refs/heads/"+branch); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	return tip
}

func TestReceived(t *testing.T) {
	ctx := t.Context()
	f := newPushFixture(t)
	tip := f.containerPush(t, "aimi-r", "feat-r", "r.txt")
	mirror := f.s.mirrorPath("swarm-p")
	if repo, got, err := f.s.Received(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-r"}, "feat-r"); repo != mirror || got != tip || err != nil {
		t.Fatalf("Received = %q, %q, %v; want %q, %q", repo, got, err, mirror, tip)
	}
	if _, err := f.s.Grant(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-idle", Branch: "feat-idle"}, ""); err != nil {
		t.Fatal(err)
	}
	if repo, got, err := f.s.Received(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-idle"}, "feat-idle"); repo != mirror || got != "" || err != nil {
		t.Fatalf("Received of a container that never pushed = %q, %q, %v; want the mirror and no tip", repo, got, err)
	}
	if _, _, err := f.s.Received(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-r"}, "other"); err == nil {
		t.Fatal("a branch other than the granted one was answered")
	}
	if _, _, err := f.s.Received(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-nobody"}, "feat-x"); !errors.Is(err, ErrUnknownContainer) {
		t.Fatalf("Received of an unknown container: %v, want ErrUnknownContainer", err)
	}
}

// TestForgetKeepsAMirrorWithUnpublishedWork: a branch the container pushed
// but that never reached the checkout (the daemon died before publishing,
// or the publish failed) lives only in the mirror, so Forget keeps it and
// says how to fetch it; once published, Forget deletes it.
func TestForgetKeepsAMirrorWithUnpublishedWork(t *testing.T) {
	ctx := t.Context()
	f := newPushFixture(t)
	tip := f.containerPush(t, "aimi-u", "feat-u", "u.txt")
	mirror := f.s.mirrorPath("swarm-p")
	err := f.s.Forget(ctx, "swarm-p")
	if !errors.Is(err, ErrUnpublished) || !strings.Contains(err.Error(), "feat-u") || !strings.Contains(err.Error(), "fetch "+mirror) {
		t.Fatalf("Forget with unpublished work = %v, want ErrUnpublished naming feat-u and the fetch", err)
	}
	if got := mustGit(t, mirror, "rev-parse", "refs/heads/feat-u"); got != tip {
		t.Fatalf("the mirror lost the branch: %s, want %s", got, tip)
	}
	if _, ok := f.s.recordByName(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-u"}); !ok {
		t.Error("the container's record went although its mirror was kept")
	}
	mustGit(t, f.user, "fetch", "-q", mirror, "refs/heads/feat-u:refs/heads/feat-u")
	if err := f.s.Forget(ctx, "swarm-p"); err != nil {
		t.Fatalf("Forget after the publish: %v", err)
	}
	if _, err := os.Stat(mirror); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mirror still there after everything was published (stat: %v)", err)
	}
}

type fakeProbe map[string]string

func (p fakeProbe) BranchTip(_ context.Context, name, _ string) (string, error) {
	tip, ok := p[name]
	if !ok {
		return "", errors.New("container gone")
	}
	return tip, nil
}

func TestUnreceived(t *testing.T) {
	ctx := t.Context()
	f := newPushFixture(t)
	pushed := f.containerPush(t, "aimi-p", "feat-p", "p.txt")
	if _, err := f.s.Grant(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"}, ""); err != nil {
		t.Fatal(err)
	}
	userOnly := mustGit(t, f.user, "rev-parse", "HEAD")
	lost := strings.Repeat("ab", 20)

	t.Run("without a probe", func(t *testing.T) {
		for _, tc := range []struct {
			name, container, branch string
			wantErr                 error
		}{
			{"a container that pushed has delivered", "aimi-p", "feat-p", nil},
			{"a container that never pushed is unknown work", "aimi-silent", "feat-s", ErrNothingReceived},
			{"a container never granted is unknown", "aimi-x", "feat-x", ErrUnknownContainer},
		} {
			t.Run(tc.name, func(t *testing.T) {
				commits, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: tc.container, Branch: tc.branch})
				if !errors.Is(err, tc.wantErr) || len(commits) != 0 {
					t.Fatalf("Unreceived = %v, %v; want none, %v", commits, err, tc.wantErr)
				}
			})
		}
		if _, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-p", Branch: "other"}); err == nil {
			t.Fatal("a branch other than the granted one was answered")
		}
	})
	t.Run("with a probe", func(t *testing.T) {
		defer func() { f.s.opts.TipProbe = nil }()
		for _, tc := range []struct {
			name, tip string
			want      []string
			err       bool
		}{
			{"tip the service received", pushed, nil, false},
			{"tip only the user's checkout has", userOnly, nil, false},
			{"tip nobody received", lost, []string{lost}, false},
			{"no branch in the container", "", nil, false},
			{"garbage from the probe", "--upload-pack=x", nil, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f.s.opts.TipProbe = fakeProbe{"aimi-silent": tc.tip}
				commits, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"})
				if (err != nil) != tc.err || strings.Join(commits, ",") != strings.Join(tc.want, ",") {
					t.Fatalf("Unreceived = %v, %v; want %v (error %v)", commits, err, tc.want, tc.err)
				}
			})
		}
		f.s.opts.TipProbe = fakeProbe{}
		if _, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"}); err == nil {
			t.Fatal("a probe error was swallowed")
		}
	})
}

// A push git refuses (not a fast-forward) of a branch that came with the
// user's snapshot is not taken for the container's delivery.
func TestRefusedPushIsNotDelivery(t *testing.T) {
	ctx := t.Context()
	repo := newRepo(t)
	mustGit(t, repo, "branch", "feat-u")
	commitFile(t, repo, "more.txt", "more\n")
	mustGit(t, repo, "branch", "-f", "feat-u", "HEAD")
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-u", Container: "aimi-u", Branch: "feat-u"}, "")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "w")
	env := clientEnv(g.CAFile, bearer(g.Token))
	if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	mustGit(t, work, "checkout", "-q", "-b", "mine", "HEAD~1")
	commitFile(t, work, "side.txt", "side\n")
	if out, err := gitOut(work, env, "push", "--force", "origin", "HEAD:refs/heads/feat-u"); err == nil {
		t.Fatalf("non-fast-forward push accepted\n%s", out)
	}
	if _, err := s.Unreceived(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-u", Container: "aimi-u", Branch: "feat-u"}); !errors.Is(err, ErrNothingReceived) {
		t.Fatalf("Unreceived = %v, want ErrNothingReceived", err)
	}
}

// Containers finishing together publish into the same checkout at once.

// TestObjectsNoRefNamesAreNotReceived: a publish refused (branch checked
// out, or diverged) has already fetched the container's commits into the
// checkout's object store, but no ref names them, and git gc --prune=now
// deletes them. Neither Unreceived nor Forget may count them as received;
// once a ref (a keep ref, say) names them, both do.
func TestObjectsNoRefNamesAreNotReceived(t *testing.T) {
	ctx := t.Context()
	f := newPushFixture(t)
	// The container pushed; its branch is in the mirror only.
	if _, err := f.s.Grant(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"}, ""); err != nil {
		t.Fatal(err)
	}
	tip := f.containerPush(t, "aimi-p", "feat-p", "p.txt")
	mirror := f.s.mirrorPath("swarm-p")
	// What a refused publish leaves: the objects, no ref.
	mustGit(t, f.user, "fetch", "-q", "--no-write-fetch-head", mirror, "refs/heads/feat-p")
	mustGit(t, f.user, "cat-file", "-e", tip+"^{commit}")

	f.s.opts.TipProbe = fakeProbe{"aimi-silent": tip}
	defer func() { f.s.opts.TipProbe = nil }()
	// The service's mirror names it: received.
	if commits, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"}); err != nil || len(commits) != 0 {
		t.Fatalf("Unreceived of a tip the mirror's branch names = %v, %v; want none", commits, err)
	}
	// A tip only the checkout's object store holds (the mirror forgotten).
	if err := os.RemoveAll(mirror); err != nil {
		t.Fatal(err)
	}
	commits, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"})
	if err != nil || len(commits) != 1 || commits[0] != tip {
		t.Fatalf("Unreceived of a tip no ref names = %v, %v; want [%s]", commits, err, tip)
	}
	mustGit(t, f.user, "update-ref", contract.KeptRef(contract.Sandbox{Swarm: "swarm-p", Container: "aimi-silent"}), tip)
	if commits, err := f.s.Unreceived(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "swarm-p", Container: "aimi-silent", Branch: "feat-s"}); err != nil || len(commits) != 0 {
		t.Fatalf("Unreceived of a tip a keep ref names = %v, %v; want none", commits, err)
	}
}

// TestForgetKeepsAMirrorWhoseBranchOnlyLooseObjectsHold: Forget deletes
// the mirror only when a ref of the checkout reaches each of its
// branches, not when the objects merely exist there.
func TestForgetKeepsAMirrorWhoseBranchOnlyLooseObjectsHold(t *testing.T) {
	ctx := t.Context()
	f := newPushFixture(t)
	f.containerPush(t, "aimi-u", "feat-u", "u.txt")
	mirror := f.s.mirrorPath("swarm-p")
	mustGit(t, f.user, "fetch", "-q", "--no-write-fetch-head", mirror, "refs/heads/feat-u")
	if err := f.s.Forget(ctx, "swarm-p"); !errors.Is(err, ErrUnpublished) {
		t.Fatalf("Forget with the branch's commits in no ref of the checkout = %v, want ErrUnpublished", err)
	}
	if _, err := os.Stat(mirror); err != nil {
		t.Fatalf("the mirror went: %v", err)
	}
}

// TestOnPushHearsAcceptedAndRefusedPushes: the hook the daemon's metrics
// use hears a push that moved the branch as accepted and one the gate
// refused as refused.
func TestOnPushHearsAcceptedAndRefusedPushes(t *testing.T) {
	ctx := t.Context()
	repo := newRepo(t)
	mustGit(t, repo, "branch", "feat-o")
	var mu sync.Mutex
	heard := map[bool]int{}
	s, _ := newService(t, Options{OnPush: func(ok bool) { mu.Lock(); heard[ok]++; mu.Unlock() }})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-o", Container: "aimi-o", Branch: "feat-o"}, "")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "w")
	env := clientEnv(g.CAFile, bearer(g.Token))
	if out, err := gitOut("", env, "clone", "-q", "-b", "feat-o", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	commitFile(t, work, "o.txt", "o\n")
	if out, err := gitOut(work, env, "push", "-q", "origin", "HEAD:refs/heads/feat-o"); err != nil {
		t.Fatalf("push of its own branch: %v\n%s", err, out)
	}
	if out, err := gitOut(work, env, "push", "-q", "origin", "HEAD:refs/heads/someone-else"); err == nil {
		t.Fatalf("push of another branch accepted\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if heard[true] != 1 || heard[false] != 1 {
		t.Fatalf("OnPush heard %d accepted and %d refused, want 1 and 1", heard[true], heard[false])
	}
}
