package publish

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
)

const ghToken = "ghp_publishertesttoken00000000000003"

var errUnknown = errors.New("unknown container")

// fakeSource stands in for the git service: one bare repository (the
// swarm's mirror) and the tip each container pushed.
type fakeSource struct {
	repo string
	mu   sync.Mutex
	tips map[string]string // container -> tip, "" when it never pushed
}

func (s *fakeSource) Received(sb contract.Sandbox, branch string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tip, ok := s.tips[sb.Container]
	if !ok {
		return "", "", errUnknown
	}
	return s.repo, tip, nil
}

// publisherFixture: a user checkout whose origin points (through its own
// insteadOf) at a local bare repository standing in for GitHub, a mirror
// of the checkout standing in for the git service, and a publisher
// configured with a fake API.
type publisherFixture struct {
	p      *Publisher
	src    *fakeSource
	logs   *syncbuf.Buffer
	user   string
	hosted string
}

func newPublisherFixture(t *testing.T, token string) publisherFixture {
	t.Helper()
	user := newRepo(t, false)
	root := t.TempDir()
	hosted := filepath.Join(root, "acme", "widgets.git")
	if err := os.MkdirAll(filepath.Dir(hosted), 0o755); err != nil {
		t.Fatal(err)
	}
	mustGit(t, "", "init", "-q", "--bare", "-b", "main", hosted)
	mustGit(t, user, "remote", "add", "origin", "https://github.example/acme/widgets.git")
	mustGit(t, user, "config", "url.file://"+root+"/.insteadOf", "https://github.example/")
	mustGit(t, user, "push", "-q", "origin", "main")
	mirror := filepath.Join(t.TempDir(), "mirror.git")
	mustGit(t, "", "clone", "-q", "--bare", user, mirror)
	api := gittest.NewGitHubPulls(t, ghToken, "acme/widgets", "github.example")
	logs := &syncbuf.Buffer{}
	src := &fakeSource{repo: mirror, tips: map[string]string{}}
	p := NewPublisher(src, Options{
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		GitHubAPI:  api.URL,
		GitHubHost: "github.example",
		Getenv: func(k string) string {
			if k == DefaultTokenEnv {
				return token
			}
			return ""
		},
	})
	return publisherFixture{p: p, src: src, logs: logs, user: user, hosted: hosted}
}

// containerPush plays a container pushing files on branch to the mirror
// and the git service noting its tip.
func (f publisherFixture) containerPush(t *testing.T, name, branch string, files ...string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), name)
	mustGit(t, "", "clone", "-q", f.src.repo, work)
	mustGit(t, work, "checkout", "-q", "-b", branch)
	var tip string
	for _, file := range files {
		tip = commit(t, work, file)
	}
	mustGit(t, work, "push", "-q", "origin", "HEAD:refs/heads/"+branch)
	f.src.mu.Lock()
	f.src.tips[name] = tip
	f.src.mu.Unlock()
	return tip
}

func (f publisherFixture) granted(name string) {
	f.src.mu.Lock()
	f.src.tips[name] = ""
	f.src.mu.Unlock()
}

func TestPublish(t *testing.T) {
	ctx := t.Context()
	f := newPublisherFixture(t, ghToken)

	t.Run("branch lands in the checkout and the hosted remote, prUrl from the API", func(t *testing.T) {
		tip := f.containerPush(t, "aimi-a", "feat-a", "a1.txt", "a2.txt")
		pr, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-a", Branch: "feat-a"})
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
		mine := commit(t, f.user, "mine.txt")
		mustGit(t, f.user, "checkout", "-q", "main")
		pr, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-b", Branch: "feat-b"})
		if !errors.Is(err, ErrDiverged) || pr != nil || !strings.Contains(err.Error(), "diverged") {
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
		_, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-c", Branch: "feat-c"})
		mustGit(t, f.user, "checkout", "-q", "main")
		if !errors.Is(err, ErrCheckedOut) {
			t.Fatalf("err = %v, want ErrCheckedOut", err)
		}
		if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-c"); got != before {
			t.Fatal("the checked-out branch moved")
		}
	})
	t.Run("a container that never pushed has nothing to publish", func(t *testing.T) {
		// Its branch (main here) is in the mirror, from the user's
		// checkout: no pull request for what the user already had.
		f.granted("aimi-idle")
		pr, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-idle", Branch: "main"})
		if err != nil || pr != nil {
			t.Fatalf("Publish = %v, %v; want nil, nil", pr, err)
		}
	})
	t.Run("unknown container is an error", func(t *testing.T) {
		if _, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-nobody", Branch: "x"}); !errors.Is(err, errUnknown) {
			t.Fatalf("err = %v", err)
		}
	})
	if strings.Contains(f.logs.String(), ghToken) {
		t.Fatal("the GitHub token is in the logs")
	}
}

func TestPublishAPIErrorIsAClearError(t *testing.T) {
	f := newPublisherFixture(t, "ghp_wrong")
	tip := f.containerPush(t, "aimi-e", "feat-e", "e.txt")
	pr, err := f.p.Publish(t.Context(), contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-e", Branch: "feat-e"})
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
	f := newPublisherFixture(t, "")
	tip := f.containerPush(t, "aimi-n", "feat-n", "n.txt")
	pr, err := f.p.Publish(t.Context(), contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-n", Branch: "feat-n"})
	if err != nil || pr != nil {
		t.Fatalf("Publish = %v, %v; want nil, nil", pr, err)
	}
	if got := mustGit(t, f.user, "rev-parse", "refs/heads/feat-n"); got != tip {
		t.Fatal("branch not in the checkout")
	}
	if out := mustGit(t, f.hosted, "for-each-ref", "refs/heads/feat-n"); out != "" {
		t.Fatal("pushed to the hosted remote without a token")
	}
}

func TestPublishedSaysWhetherTheBranchReachedTheCheckout(t *testing.T) {
	ctx := t.Context()
	f := newPublisherFixture(t, "")
	f.containerPush(t, "aimi-q", "feat-q", "q.txt")
	if ok, err := f.p.Published(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-q", Branch: "feat-q"}); ok || err != nil {
		t.Fatalf("Published before the publish = %v, %v; want false", ok, err)
	}
	if _, err := f.p.Publish(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-q", Branch: "feat-q"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.p.Published(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-q", Branch: "feat-q"}); !ok || err != nil {
		t.Fatalf("Published after the publish = %v, %v; want true", ok, err)
	}
	f.granted("aimi-idle")
	if ok, err := f.p.Published(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-idle", Branch: "feat-idle"}); !ok || err != nil {
		t.Fatalf("Published of a container that never pushed = %v, %v; want true (nothing to publish)", ok, err)
	}
	if _, err := f.p.Published(ctx, contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: "aimi-nobody", Branch: "feat-x"}); !errors.Is(err, errUnknown) {
		t.Fatalf("Published of an unknown container: %v, want the source's error", err)
	}
}

// Containers finishing together publish into the same checkout at once.
func TestConcurrentPublishes(t *testing.T) {
	f := newPublisherFixture(t, "")
	names := []string{"aimi-k1", "aimi-k2", "aimi-k3", "aimi-k4"}
	tips := map[string]string{}
	for _, n := range names {
		tips[n] = f.containerPush(t, n, "feat-"+n, n+".txt")
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			if _, err := f.p.Publish(t.Context(), contract.ContainerBranch{Repo: f.user, Swarm: "s1", Container: n, Branch: "feat-" + n}); err != nil {
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
