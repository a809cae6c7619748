package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// git runs the git CLI in the workspace. No git process ever holds the
// token: clone and push go through the runner's relay (see relay), and git's
// environment has none of the runner's GIT_* variables. Every git command
// runs with command-scope configuration (the highest precedence) that turns
// off what the agent could plant to run its own programs through the
// runner's git: hooks, fsmonitor, credential helpers; the user's global
// configuration ($HOME is the agent's) is not read at all. Filters and
// similar attributes may still run the agent's programs, with nothing in
// their environment the agent does not already have.
type git struct {
	dir     string
	env     []string
	repoURL string // the task-request's repository, without credentials
	relay   *relay // nil for non-http(s) URLs (no token is ever used there)
	secret  []string
	log     *slog.Logger
	mu      sync.Mutex
	// received is the branch tip the repository is known to hold: what
	// clone and checkout found, then what each successful push sent.
	received string
}

func newGit(cfg *Config) *git {
	env := make([]string, 0, len(cfg.Env)+16)
	for _, kv := range cfg.Env {
		// GIT_* of the runner's environment (GIT_SSL_CAINFO, a planted
		// GIT_CONFIG_*, GIT_SSH_COMMAND...) are the relay's business or
		// nobody's.
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, contract.EnvGitToken+"=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0", // a missing credential must fail, not wait for a tty
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME="+cfg.AuthorName, "GIT_AUTHOR_EMAIL="+cfg.AuthorEmail,
		"GIT_COMMITTER_NAME="+cfg.AuthorName, "GIT_COMMITTER_EMAIL="+cfg.AuthorEmail,
	)
	g := &git{dir: cfg.Workspace, log: cfg.Logger}
	// safe.directory: the workspace may be a volume owned by another uid
	// than the runner's, and git refuses such a repository unless protected
	// config allows it. The rest: programs the agent could name in the
	// workspace's config.
	cfgs := [][2]string{
		{"safe.directory", cfg.Workspace},
		{"core.hooksPath", os.DevNull},
		{"core.fsmonitor", "false"},
		{"core.sshCommand", "ssh"},
		{"core.askPass", ""},
		{"credential.helper", ""}, // an empty value resets the list
		{"commit.gpgSign", "false"},
		{"protocol.ext.allow", "never"},
		{"protocol.file.allow", "never"},
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfgs)))
	for i, kv := range cfgs {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	g.env = env
	return g
}

// connect starts the relay to repoURL (http and https URLs), carrying the
// token when one is configured.
func (g *git) connect(cfg *Config, repoURL string) error {
	g.repoURL = repoURL
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil // ssh: git's own transport, never with the token
	}
	auth := ""
	if cfg.GitToken != "" {
		basic := base64.StdEncoding.EncodeToString([]byte(cfg.GitUsername + ":" + cfg.GitToken))
		auth = "Basic " + basic
		g.secret = []string{cfg.GitToken, basic}
	}
	r, err := newRelay(repoURL, auth, cfg.CAFile, cfg.Dial, g.log)
	if err != nil {
		return err
	}
	g.relay = r
	return nil
}

// close stops the relay.
func (g *git) close() {
	if g.relay != nil {
		_ = g.relay.close()
	}
}

func (g *git) redact(s string) string {
	for _, sec := range g.secret {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// run executes git with args in dir (the workspace unless dir is set) and
// returns trimmed stdout; the error carries git's stderr.
func (g *git) runIn(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = g.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		name := args[0]
		if name == "-c" && len(args) > 2 {
			name = args[2] // the command, not the configuration before it
		}
		return "", fmt.Errorf("git %s: %v: %s", g.redact(name), err, g.redact(msg))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (g *git) run(ctx context.Context, args ...string) (string, error) {
	return g.runIn(ctx, g.dir, args...)
}

// remote returns the URL a git command must use to reach the repository and
// a function that ends its relay session (a no-op without relay).
func (g *git) remote() (string, func() relaySession, error) {
	if g.relay == nil {
		return g.repoURL, func() relaySession { return relaySession{advertised: true} }, nil
	}
	return g.relay.begin()
}

// clone clones into the (empty or missing) workspace only what working on
// branch needs: its tip when the repository has it (a resume), else the tip
// of the repository's default branch, which a new branch starts from.
// exists is what the task-request said of the branch (nil: not said, an
// older daemon); then the repository is asked first (ls-remote), one more
// round trip. The history behind the tip is not fetched (a shallow clone
// of one branch, no tags): the runner only commits on top and pushes,
// which a tip-only clone does as well, and a repository with gigabytes of
// history is cloned in the time of its working tree. The clone's origin
// names the repository itself (no relay session outlives its command).
// While the repository is unreachable (the daemon killed between sending
// the task-request and the clone, its git service not listening yet) it
// retries with backoff for up to budget, as the last push does; any other
// failure is final at once. It returns whether the branch was cloned
// (else the default branch was).
func (g *git) clone(ctx context.Context, branch string, exists *bool, budget time.Duration) (cloned bool, err error) {
	attempts, took, err := retryWhileAway(ctx, budget, func() (retry bool, err error) {
		cloned, retry, err = g.cloneOnce(ctx, branch, exists)
		return retry, err
	}, func(attempt int, wait time.Duration, err error) {
		g.log.Info("clone failed, retrying", "branch", branch, "attempt", attempt, "in", wait, "err", err)
	})
	if err != nil && exists != nil && ctx.Err() == nil && !errors.As(err, new(*unreachableError)) {
		// The task-request's word is a hint: a refused clone asks the
		// repository itself before giving up.
		g.log.Info("clone failed; asking the repository whether the branch exists", "branch", branch, "hint", *exists, "err", err)
		return g.clone(ctx, branch, nil, budget)
	}
	switch {
	case err != nil && attempts > 1:
		return false, fmt.Errorf("%w (%d attempts over %s)", err, attempts, took.Round(time.Second))
	case err == nil && attempts > 1:
		g.log.Info("clone went through after retries", "branch", branch, "attempts", attempts, "took", took.Round(time.Millisecond))
	}
	return cloned, err
}

// cloneOnce is one clone attempt; retry says whether the failure may pass
// (the repository was unreachable). A failed git clone removes what it
// wrote, so the next attempt finds the workspace empty again.
func (g *git) cloneOnce(ctx context.Context, branch string, exists *bool) (cloned, retry bool, err error) {
	if exists != nil {
		cloned = *exists
	} else if cloned, err = g.remoteHasBranch(ctx, branch); err != nil {
		return false, errors.As(err, new(*unreachableError)), err
	}
	args := []string{"clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags"}
	if cloned {
		// The local branch is made at once, tracking origin's.
		args = append(args, "--branch", branch)
	}
	u, end, err := g.remote()
	if err != nil {
		return false, false, err
	}
	if u != g.repoURL {
		// The repository's own URL is what the clone records as origin;
		// a rewrite in this command's configuration alone sends it
		// through the relay session.
		args = append([]string{"-c", "url." + u + ".insteadOf=" + g.repoURL}, args...)
	}
	_, err = g.runIn(ctx, "", append(args, "--", g.repoURL, g.dir)...)
	s := end()
	if err != nil {
		if s.upstreamErr != nil {
			return false, true, &unreachableError{err: err, upstream: s.upstreamErr}
		}
		return false, false, err
	}
	return cloned, false, nil
}

// unreachableError is a git command that failed because the relay could
// not reach the repository (no answer, or a 5xx).
type unreachableError struct{ err, upstream error }

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%v (the repository was unreachable: %v)", e.err, e.upstream)
}

func (e *unreachableError) Unwrap() error { return e.err }

// retryWhileAway runs once until it succeeds, fails for good (retry
// false), ctx ends or the next attempt would start past budget; the first
// retry comes after pushBackoffMin, doubling up to pushBackoffMax. retrying
// is told of each retry before its wait.
func retryWhileAway(ctx context.Context, budget time.Duration, once func() (retry bool, err error), retrying func(attempt int, wait time.Duration, err error)) (attempts int, took time.Duration, err error) {
	start := time.Now()
	wait := pushBackoffMin
	for attempt := 1; ; attempt++ {
		retry, err := once()
		took := time.Since(start)
		if err == nil {
			return attempt, took, nil
		}
		if !retry || ctx.Err() != nil || took+wait > budget {
			return attempt, took, err
		}
		retrying(attempt, wait, err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, time.Since(start), fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, pushBackoffMax)
	}
}

// remoteHasBranch asks the repository whether it has refs/heads/branch (one
// ref advertisement, no objects).
func (g *git) remoteHasBranch(ctx context.Context, branch string) (bool, error) {
	ref := "refs/heads/" + branch
	u, end, err := g.remote()
	if err != nil {
		return false, err
	}
	out, err := g.runIn(ctx, "", "ls-remote", "--heads", "--", u, ref)
	s := end()
	if err != nil {
		if s.upstreamErr != nil {
			return false, &unreachableError{err: err, upstream: s.upstreamErr}
		}
		return false, err
	}
	// ls-remote matches patterns by their tail; only the exact ref counts.
	for _, line := range strings.Split(out, "\n") {
		if _, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return true, nil
		}
	}
	return false, nil
}

// checkout switches to branch after the workspace is filled: already
// there when onBranch (the branch was cloned, or the image's workspace
// was brought to it), else it is made here from HEAD. Either way
// the repository holds HEAD then.
func (g *git) checkout(ctx context.Context, branch string, onBranch bool) error {
	var head string
	var err error
	if onBranch {
		head, err = g.head(ctx, branch)
	} else {
		head, err = g.startBranch(ctx, branch)
	}
	if err != nil {
		return err
	}
	g.received = head
	return nil
}

// head is the commit of branch, which HEAD names right after checkout:
// read from the ref files the clone and checkout just wrote (a loose ref,
// else packed-refs), or through git when they do not say (another ref
// storage, HEAD elsewhere).
func (g *git) head(ctx context.Context, branch string) (string, error) {
	gitDir := filepath.Join(g.dir, ".git")
	ref := "refs/heads/" + branch
	if h, err := os.ReadFile(filepath.Join(gitDir, "HEAD")); err == nil && strings.TrimSpace(string(h)) == "ref: "+ref {
		if oid, ok := readRefFile(gitDir, ref); ok {
			return oid, nil
		}
	}
	return g.run(ctx, "rev-parse", "--verify", "HEAD^{commit}")
}

// commitAll stages the whole tree and commits; nothing to commit is not an
// error (ok is false then).
func (g *git) commitAll(ctx context.Context, msg string) (ok bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.run(ctx, "add", "--all"); err != nil {
		return false, err
	}
	if _, err := g.run(ctx, "diff", "--cached", "--quiet"); err == nil {
		return false, nil
	}
	if _, err := g.run(ctx, "commit", "--quiet", "--no-verify", "-m", msg); err != nil {
		return false, err
	}
	return true, nil
}

// pushError is a push that failed for good or ran out of retries.
type pushError struct {
	attempts int
	took     time.Duration
	err      error
}

func (e *pushError) Error() string {
	if e.attempts > 1 {
		return fmt.Sprintf("%v (%d attempts over %s)", e.err, e.attempts, e.took.Round(time.Second))
	}
	return e.err.Error()
}

func (e *pushError) Unwrap() error { return e.err }

// Backoff of the retries while the repository is unreachable (push and
// clone): the first retry after pushBackoffMin, doubling up to
// pushBackoffMax.
const (
	pushBackoffMin = 500 * time.Millisecond
	pushBackoffMax = 10 * time.Second
)

// push pushes HEAD to branch at the request's repository (named explicitly
// rather than as "origin", which the agent can edit). While the repository
// is unreachable (the daemon restarting, its git service not listening
// yet, a 5xx) it retries with backoff for up to budget; a refusal (not a
// fast-forward, a gate, a bad token) is final at once.
func (g *git) push(ctx context.Context, branch string, budget time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	attempts, took, err := retryWhileAway(ctx, budget, func() (bool, error) { return g.pushOnce(ctx, branch) },
		func(attempt int, wait time.Duration, err error) {
			g.log.Info("push failed, retrying", "branch", branch, "attempt", attempt, "in", wait, "err", err)
		})
	if err != nil {
		return &pushError{attempts: attempts, took: took, err: err}
	}
	if attempts > 1 {
		g.log.Info("push went through after retries", "branch", branch, "attempts", attempts, "took", took.Round(time.Millisecond))
	}
	return nil
}

// pushOnce is one push attempt; retry says whether the failure may pass.
func (g *git) pushOnce(ctx context.Context, branch string) (retry bool, err error) {
	if out, err := g.run(ctx, "config", "--get-regexp", `^url\..*\.(push)?insteadof$`); err == nil && out != "" {
		return false, fmt.Errorf("refusing to push: the repository's git config rewrites URLs (%s); remove the url.*.insteadOf entries", g.redact(oneLine(out, 200)))
	}
	head, err := g.run(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return false, err
	}
	u, end, err := g.remote()
	if err != nil {
		return false, err
	}
	_, err = g.run(ctx, "push", "--quiet", u, head+":refs/heads/"+branch)
	s := end()
	switch {
	case s.upstreamErr != nil:
		if err == nil {
			err = errors.New("git push")
		}
		return true, fmt.Errorf("%w (the repository was unreachable: %v)", err, s.upstreamErr)
	case err != nil:
		// Without the relay (ssh) there is no telling an absent service
		// from a refusal but git's words.
		retry := g.relay == nil && !strings.Contains(err.Error(), "rejected")
		if reason := serviceRefusal(err.Error()); reason != "" {
			// The reason alone: the completion keeps 500 characters of
			// an error, and git's own lines around it would push it out.
			g.log.Info("push refused by the git service", "git", err)
			err = errors.New("the git service refused it: " + reason)
		}
		return retry, err
	case !s.advertised:
		return false, errors.New("git reported the push done, but it never reached the repository (does the git configuration send it elsewhere, e.g. http.proxy?)")
	}
	g.received = head
	return false, nil
}

// serviceRefusal is the reason aimi's git service gave for refusing a push
// (its "remote: aimi: ..." lines in git's output, once each), or "".
func serviceRefusal(gitOutput string) string {
	const mark = "remote: aimi:"
	var reasons []string
	for _, line := range strings.Split(gitOutput, "\n") {
		// The first line of git's output follows "git push: exit
		// status N: " in the error.
		i := strings.Index(line, mark)
		if i < 0 {
			continue
		}
		if r := strings.TrimSpace(line[i+len("remote: "):]); !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	return strings.Join(reasons, "; ")
}

// unreceived lists (newest first, at most max) the commits of HEAD the
// repository is not known to hold, and how many there are.
func (g *git) unreceived(ctx context.Context, max int) (commits []string, total int, err error) {
	g.mu.Lock()
	base := g.received
	g.mu.Unlock()
	args := []string{"rev-list", "HEAD"}
	if base != "" {
		args = append(args, "^"+base)
	}
	out, err := g.run(ctx, args...)
	if err != nil {
		return nil, 0, err
	}
	all := strings.Fields(out)
	return all[:min(len(all), max)], len(all), nil
}

// addWorktree checks out HEAD, detached, into a fresh directory for one
// story, so concurrent stories neither see nor commit each other's edits.
// The directories live in the workspace's .git (never tracked, on the
// workspace's volume): /tmp may be a small tmpfs when the container's root
// is read-only.
func (g *git) addWorktree(ctx context.Context, storyID string) (string, error) {
	base := filepath.Join(g.dir, ".git", "aimi-worktrees")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("worktree directory for %s: %w", storyID, err)
	}
	dir, err := os.MkdirTemp(base, storyID+"-")
	if err != nil {
		return "", fmt.Errorf("worktree directory for %s: %w", storyID, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.run(ctx, "worktree", "add", "--quiet", "--detach", dir, "HEAD"); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// removeWorktree deletes a story's worktree and its administrative files.
func (g *git) removeWorktree(ctx context.Context, dir string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.run(ctx, "worktree", "remove", "--force", dir); err != nil {
		os.RemoveAll(dir)
		_, _ = g.run(ctx, "worktree", "prune")
	}
}

// applyWorktree brings a finished story's changes from its worktree into the
// workspace (staged, not committed): commit them in the worktree, then
// cherry-pick that commit onto the branch, which may have moved on since the
// story started. The task file is left out (the runner owns it). changed is
// false when the story changed nothing; a conflict with stories that finished
// first is an error, and the workspace is restored to HEAD.
func (g *git) applyWorktree(ctx context.Context, dir, taskPath, msg string) (changed bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.runIn(ctx, dir, "add", "--all"); err != nil {
		return false, err
	}
	// Drop any edit of the task file: restore it in index and tree.
	if _, err := g.runIn(ctx, dir, "checkout", "HEAD", "--", taskPath); err != nil {
		return false, err
	}
	if _, err := g.runIn(ctx, dir, "diff", "--cached", "--quiet"); err == nil {
		return false, nil
	}
	if _, err := g.runIn(ctx, dir, "commit", "--quiet", "--no-verify", "-m", msg); err != nil {
		return false, err
	}
	sha, err := g.runIn(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return false, err
	}
	if _, err := g.run(ctx, "cherry-pick", "--no-commit", sha); err != nil {
		// The workspace holds no one else's work in isolated mode.
		_, _ = g.run(ctx, "reset", "--quiet", "--hard", "HEAD")
		return false, fmt.Errorf("its changes conflict with stories that finished first: %w", err)
	}
	return true, nil
}
