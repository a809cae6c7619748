package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// Names and defaults that other parts of aimi rely on.
const (
	// DefaultTokenEnv is the daemon environment variable holding the GitHub
	// token used to push and open pull requests.
	DefaultTokenEnv = "GITHUB_TOKEN"
	// DefaultHostedRemote is the remote of the user's checkout that
	// publishing pushes to.
	DefaultHostedRemote = "origin"
)

// Source says where a container's branch was received: the git service of
// local mode (package gitserve) satisfies it.
type Source interface {
	// Received returns the bare repository holding the branch of
	// container sb as it was received, and the branch's tip there (""
	// when the container never pushed it). A container the source does
	// not know is an error.
	Received(sb contract.Sandbox, branch string) (repo, tip string, err error)
}

// Options configure a Publisher; zero values take the defaults named.
type Options struct {
	// Logger receives the publisher's logs (default slog.Default()). The
	// token is never logged.
	Logger *slog.Logger
	// GitHubAPI is the REST API base for pull requests (default
	// https://api.github.com; GitHub Enterprise: https://<host>/api/v3).
	GitHubAPI string
	// GitHubHost is the web host of remotes that API serves (default
	// github.com for the default API, else the API's host).
	GitHubHost string
	// TokenEnv names the daemon environment variable holding the GitHub
	// token (default GITHUB_TOKEN). Without a token, Publish stops after
	// the user's checkout.
	TokenEnv string
	// HostedRemote is the remote of the user's checkout that Publish pushes
	// to (default origin).
	HostedRemote string
	// PRBase is the pull requests' base branch (default: the remote's HEAD
	// branch, else the branch the swarm started from).
	PRBase string
	// HTTPClient talks to the GitHub API (default: 30s timeout).
	HTTPClient *http.Client
	// Getenv reads the daemon's environment (default os.Getenv); tests
	// replace it.
	Getenv func(string) string
}

// Publisher brings branches that containers delivered to a Source into the
// user's checkout and, when configured, to the hosted remote with a pull
// request. It is safe for concurrent use.
type Publisher struct {
	src  Source
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// locks serialize Publish per checkout: containers finishing together
	// would otherwise race on the same refs and remote.
	locks map[string]*sync.Mutex
}

// NewPublisher returns a Publisher reading received branches from src.
func NewPublisher(src Source, opts Options) *Publisher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TokenEnv == "" {
		opts.TokenEnv = DefaultTokenEnv
	}
	if opts.HostedRemote == "" {
		opts.HostedRemote = DefaultHostedRemote
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &Publisher{src: src, opts: opts, log: opts.Logger.With("component", "publish"), locks: map[string]*sync.Mutex{}}
}

// userGit runs git in the user's checkout with the user's own config: their
// proxies, insteadOf rewrites and hooks apply as when they run git.
var userGit = gitcmd.Git{}

// receivedGit runs git on the Source's repositories with a hermetic config:
// the daemon user's global and system config (hooksPath, aliases) must not
// change what is read there.
var receivedGit = gitcmd.Hermetic

// Publish brings the container's branch, as the Source received it, into
// the user's checkout at cb.Repo as refs/heads/<branch> (created or
// fast-forwarded; a branch checked out there, held by a rebase or bisect,
// or diverged is not moved: the container's tip is then named
// UnpublishedRef(cb) there, and the error says so and how to
// merge by hand). Then, when the daemon's
// environment has a GitHub token and the checkout's hosted remote is on
// GitHub, it pushes the branch there and opens (or finds) a pull request,
// whose URL it returns. A container that never pushed its branch has
// nothing to publish: (nil, nil).
func (p *Publisher) Publish(ctx context.Context, cb contract.ContainerBranch) (*string, error) {
	repoPath, containerName, branch := cb.Repo, cb.Container, cb.Branch
	src, tip, err := p.src.Received(cb.Sandbox(), branch)
	if err != nil {
		return nil, fmt.Errorf("publish %s of %s: %w", branch, containerName, err)
	}
	if tip == "" {
		p.log.Info("nothing to publish: the container never pushed its branch", "container", containerName, "branch", branch)
		return nil, nil
	}
	lock := p.checkoutLock(repoPath)
	lock.Lock()
	defer lock.Unlock()
	keep := UnpublishedRef(cb)
	if err := checkKeep(keep); err != nil {
		p.log.Warn("a refused publish cannot name the container's tip", "container", containerName, "err", err)
		keep = ""
	}
	res, err := IntoCheckout(ctx, userGit, src, cb, keep)
	if errors.Is(err, ErrNoBranch) {
		p.log.Info("nothing to publish: the container never pushed its branch", "container", containerName, "branch", branch)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.log.Info("branch published into the checkout", "container", containerName, "branch", branch, "action", string(res.Action), "tip", res.New)
	return p.toHosted(ctx, src, repoPath, branch, branch, containerName)
}

// toHosted pushes branch of the checkout to the hosted remote and opens
// its pull request, when a token and a GitHub remote say so; srcBranch is
// the branch of src it came from (the pull request lists its commits).
func (p *Publisher) toHosted(ctx context.Context, src, repoPath, branch, srcBranch, containerName string) (*string, error) {
	fallbackBase, _ := receivedGit.Run(ctx, src, "symbolic-ref", "--quiet", "--short", "HEAD")
	hosted := Hosted{
		RemoteName: p.opts.HostedRemote,
		GitHub: GitHub{
			API:    p.opts.GitHubAPI,
			Token:  p.opts.Getenv(p.opts.TokenEnv),
			Client: p.opts.HTTPClient,
		},
		WebHost: p.opts.GitHubHost,
		Base:    p.opts.PRBase,
	}
	hr, err := hosted.Publish(ctx, userGit, repoPath, branch, fallbackBase, prBody(ctx, src, srcBranch, containerName))
	if err != nil {
		return nil, fmt.Errorf("publish %s of %s to the hosted remote (the branch is in %s already): %w", branch, containerName, repoPath, err)
	}
	if hr.Skipped != "" {
		p.log.Info("no pull request", "container", containerName, "branch", branch, "why", hr.Skipped)
		return nil, nil
	}
	p.log.Info("pull request open", "container", containerName, "branch", branch, "url", hr.PRURL)
	return &hr.PRURL, nil
}

// Published reports whether the container's branch, as the Source last
// received it, is contained in refs/heads/<branch> of the checkout at
// cb.Repo. A container that never pushed has nothing to publish: true.
func (p *Publisher) Published(ctx context.Context, cb contract.ContainerBranch) (bool, error) {
	repoPath, containerName, branch := cb.Repo, cb.Container, cb.Branch
	_, tip, err := p.src.Received(cb.Sandbox(), branch)
	if err != nil {
		return false, fmt.Errorf("published state of %s: %w", containerName, err)
	}
	if tip == "" {
		return true, nil
	}
	// Not an ancestor, no such branch and no such commit all mean: not
	// there yet.
	_, err = receivedGit.Run(ctx, repoPath, "merge-base", "--is-ancestor", tip, "refs/heads/"+branch)
	return err == nil, nil
}

// prBody lists the branch's commits that the swarm's starting point lacks.
func prBody(ctx context.Context, src, branch, containerName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Opened by aimi swarm for container `%s`.\n", containerName)
	log, err := receivedGit.Run(ctx, src, "log", "--format=- %h %s", "-n", "50", "refs/heads/"+branch, "--not", "HEAD")
	if err == nil && log != "" {
		b.WriteString("\nCommits:\n" + log + "\n")
	}
	return b.String()
}

// checkoutLock returns the mutex serializing publishes into repoPath.
func (p *Publisher) checkoutLock(repoPath string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.locks[repoPath]
	if m == nil {
		m = &sync.Mutex{}
		p.locks[repoPath] = m
	}
	return m
}
