package gitserve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/publish"
)

const ghToken = "ghp_servicetesttoken0000000000000003"

// publishFixture: a user checkout whose origin points (through its own
// insteadOf) at a local bare repository standing in for GitHub, a service
// configured with a fake API, listening on 127.0.0.1.
type publishFixture struct {
	s      *Service
	logs   *syncbuf.Buffer
	user   string
	hosted string
}

func newPublishFixture(t *testing.T, token string) publishFixture {
	t.Helper()
	user := newRepo(t)
	root := t.TempDir()
	hosted := filepath.Join(root, "acme", "widgets.git")
	if err := os.MkdirAll(filepath.Dir(hosted), 0o755); err != nil {
		t.Fatal(err)
	}
	mustGit(t, "", "init", "-q", "--bare", "-b", "main", hosted)
	mustGit(t, user, "remote", "add", "origin", "https://github.example/acme/widgets.git")
	mustGit(t, user, "config", "url.file://"+root+"/.insteadOf", "https://github.example/")
	mustGit(t, user, "push", "-q", "origin", "main")
	api := gittest.NewGitHubPulls(t, ghToken, "acme/widgets", "github.example")
	s, logs := newService(t, Options{
		GitHubAPI:  api.URL,
		GitHubHost: "github.example",
		Getenv: func(k string) string {
			if k == DefaultTokenEnv {
				return token
			}
			return ""
		},
	})
	if err := s.ListenOn(t.Context(), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return publishFixture{s: s, logs: logs, user: user, hosted: hosted}
}

// containerPush plays a container: grant, clone over https, commit the
// files on its branch, push. It returns the pushed tip.
func (f publishFixture) containerPush(t *testing.T, name, branch string, files ...string) string {
	t.Helper()
	g, err := f.s.Grant(t.Context(), f.user, "swarm-p", name, branch)
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

func TestPublish(t *testing.T) {
	ctx := t.Context()
	f := newPublishFixture(t, ghToken)

	t.Run("branch lands in the checkout and the hosted remote, prUrl from the API", func(t *testing.T) {
		tip := f.containerPush(t, "aimi-a", "feat-a", "a1.txt", "a2.txt")
		pr, err := f.s.Publish(ctx, f.user, "feat-a", "aimi-a")
		if err != nil {
			t.Fatal(err)
		}
		if pr == nil || !strings.HasPrefix(*pr, "https://github.example/acme/widgets/pull/") {
			t.Fatalf("prURL = %v", pr)
		}
		if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-a"); got != tip {
			t.Fatalf("checkout feat-a = %s, want %s", got, tip)
		}
		if got := mustGit(t, f.hosted, "rev-parse", "refs/heads/feat-a"); got != tip {
			t.Fatalf("hosted feat-a = %s, want %s", got, tip)
		}
	})
	t.Run("diverged branch is not moved and the error says why", func(t *testing.T) {
		f.containerPush(t, "aimi-b", "feat-b", "b1.txt")
		mustGit(t, f.user, "checkout", "-q", "-b", "feat-b")
		mine := commitFile(t, f.user, "mine.txt", "mine\n")
		mustGit(t, f.user, "checkout", "-q", "main")
		pr, err := f.s.Publish(ctx, f.user, "feat-b", "aimi-b")
		if !errors.Is(err, publish.ErrDiverged) || pr != nil || !strings.Contains(err.Error(), "diverged") {
			t.Fatalf("Publish = %v, %v; want ErrDiverged", pr, err)
		}
		if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-b"); got != mine {
			t.Fatal("the diverged branch moved")
		}
	})
	t.Run("checked-out branch is not moved", func(t *testing.T) {
		mustGit(t, f.user, "checkout", "-q", "-b", "feat-c")
		before := mustGit(t, f.user, "rev-parse", "HEAD")
		f.containerPush(t, "aimi-c", "feat-c", "c1.txt")
		_, err := f.s.Publish(ctx, f.user, "feat-c", "aimi-c")
		mustGit(t, f.user, "checkout", "-q", "main")
		if !errors.Is(err, publish.ErrCheckedOut) {
			t.Fatalf("err = %v, want ErrCheckedOut", err)
		}
		if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-c"); got != before {
			t.Fatal("the checked-out branch moved")
		}
	})
	t.Run("a container that never pushed has nothing to publish", func(t *testing.T) {
		if _, err := f.s.Grant(ctx, f.user, "swarm-p", "aimi-idle", "feat-idle"); err != nil {
			t.Fatal(err)
		}
		pr, err := f.s.Publish(ctx, f.user, "feat-idle", "aimi-idle")
		if err != nil || pr != nil {
			t.Fatalf("Publish = %v, %v; want nil, nil", pr, err)
		}
	})
	t.Run("unknown container is an error", func(t *testing.T) {
		if _, err := f.s.Publish(ctx, f.user, "x", "aimi-nobody"); !errors.Is(err, ErrUnknownContainer) {
			t.Fatalf("err = %v", err)
		}
	})
	if strings.Contains(f.logs.String(), ghToken) {
		t.Fatal("the GitHub token is in the logs")
	}
}

func TestPublishAPIErrorIsAClearError(t *testing.T) {
	f := newPublishFixture(t, "ghp_wrong")
	tip := f.containerPush(t, "aimi-e", "feat-e", "e.txt")
	pr, err := f.s.Publish(t.Context(), f.user, "feat-e", "aimi-e")
	if err == nil || pr != nil {
		t.Fatalf("Publish = %v, %v; want an error", pr, err)
	}
	for _, w := range []string{"401", "Bad credentials", "the branch is in"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	// The checkout part happened before the API said no.
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-e"); got != tip {
		t.Fatal("branch not in the checkout")
	}
}

func TestPublishWithoutTokenStopsAtTheCheckout(t *testing.T) {
	f := newPublishFixture(t, "")
	tip := f.containerPush(t, "aimi-n", "feat-n", "n.txt")
	pr, err := f.s.Publish(t.Context(), f.user, "feat-n", "aimi-n")
	if err != nil || pr != nil {
		t.Fatalf("Publish = %v, %v; want nil, nil", pr, err)
	}
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-n"); got != tip {
		t.Fatal("branch not in the checkout")
	}
	if out, _ := gitOut(f.hosted, nil, "for-each-ref", "refs/heads/feat-n"); out != "" {
		t.Fatal("pushed to the hosted remote without a token")
	}
}

// TestForgetKeepsAMirrorWithUnpublishedWork: a branch the container pushed
// but that never reached the checkout (the daemon died before publishing,
// or the publish failed) lives only in the mirror, so Forget keeps it and
// says how to fetch it; once published, Forget deletes it.
func TestForgetKeepsAMirrorWithUnpublishedWork(t *testing.T) {
	ctx := t.Context()
	f := newPublishFixture(t, "")
	tip := f.containerPush(t, "aimi-u", "feat-u", "u.txt")
	mirror := f.s.mirrorPath("swarm-p")
	err := f.s.Forget(ctx, "swarm-p")
	if !errors.Is(err, ErrUnpublished) || !strings.Contains(err.Error(), "feat-u") || !strings.Contains(err.Error(), "fetch "+mirror) {
		t.Fatalf("Forget with unpublished work = %v, want ErrUnpublished naming feat-u and the fetch", err)
	}
	if got := mustGit(t, mirror, "rev-parse", "refs/heads/feat-u"); got != tip {
		t.Fatalf("the mirror lost the branch: %s, want %s", got, tip)
	}
	if _, ok := f.s.recordByName("aimi-u"); !ok {
		t.Error("the container's record went although its mirror was kept")
	}
	if _, err := f.s.Publish(ctx, f.user, "feat-u", "aimi-u"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Forget(ctx, "swarm-p"); err != nil {
		t.Fatalf("Forget after the publish: %v", err)
	}
	if _, err := os.Stat(mirror); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mirror still there after everything was published (stat: %v)", err)
	}
}

func TestPublishedSaysWhetherTheBranchReachedTheCheckout(t *testing.T) {
	ctx := t.Context()
	f := newPublishFixture(t, "")
	f.containerPush(t, "aimi-q", "feat-q", "q.txt")
	if ok, err := f.s.Published(ctx, f.user, "aimi-q", "feat-q"); ok || err != nil {
		t.Fatalf("Published before the publish = %v, %v; want false", ok, err)
	}
	if _, err := f.s.Publish(ctx, f.user, "feat-q", "aimi-q"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Published(ctx, f.user, "aimi-q", "feat-q"); !ok || err != nil {
		t.Fatalf("Published after the publish = %v, %v; want true", ok, err)
	}
	if _, err := f.s.Grant(ctx, f.user, "swarm-p", "aimi-idle", "feat-idle"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.Published(ctx, f.user, "aimi-idle", "feat-idle"); !ok || err != nil {
		t.Fatalf("Published of a container that never pushed = %v, %v; want true (nothing to publish)", ok, err)
	}
	if _, err := f.s.Published(ctx, f.user, "aimi-nobody", "feat-x"); !errors.Is(err, ErrUnknownContainer) {
		t.Fatalf("Published of an unknown container: %v, want ErrUnknownContainer", err)
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
	f := newPublishFixture(t, "")
	pushed := f.containerPush(t, "aimi-p", "feat-p", "p.txt")
	if _, err := f.s.Grant(ctx, f.user, "swarm-p", "aimi-silent", "feat-s"); err != nil {
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
				commits, err := f.s.Unreceived(ctx, f.user, tc.container, tc.branch)
				if !errors.Is(err, tc.wantErr) || len(commits) != 0 {
					t.Fatalf("Unreceived = %v, %v; want none, %v", commits, err, tc.wantErr)
				}
			})
		}
		if _, err := f.s.Unreceived(ctx, f.user, "aimi-p", "other"); err == nil {
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
				commits, err := f.s.Unreceived(ctx, f.user, "aimi-silent", "feat-s")
				if (err != nil) != tc.err || strings.Join(commits, ",") != strings.Join(tc.want, ",") {
					t.Fatalf("Unreceived = %v, %v; want %v (error %v)", commits, err, tc.want, tc.err)
				}
			})
		}
		f.s.opts.TipProbe = fakeProbe{}
		if _, err := f.s.Unreceived(ctx, f.user, "aimi-silent", "feat-s"); err == nil {
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
	g, err := s.Grant(ctx, repo, "swarm-u", "aimi-u", "feat-u")
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
	if _, err := s.Unreceived(ctx, repo, "aimi-u", "feat-u"); !errors.Is(err, ErrNothingReceived) {
		t.Fatalf("Unreceived = %v, want ErrNothingReceived", err)
	}
}

// Containers finishing together publish into the same checkout at once.
func TestConcurrentPublishes(t *testing.T) {
	f := newPublishFixture(t, "")
	names := []string{"aimi-k1", "aimi-k2", "aimi-k3", "aimi-k4"}
	tips := map[string]string{}
	for _, n := range names {
		tips[n] = f.containerPush(t, n, "feat-"+n, n+".txt")
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			if _, err := f.s.Publish(t.Context(), f.user, "feat-"+n, n); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, n := range names {
		if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-"+n); got != tips[n] {
			t.Errorf("%s: checkout has %s, want %s", n, got, tips[n])
		}
	}
}
