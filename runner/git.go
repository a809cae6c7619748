package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// git runs the git CLI in the workspace. The token, when configured, reaches
// git only through GIT_CONFIG_* environment variables (http.extraHeader): it
// is never on a command line (visible in ps), never in .git/config (visible
// to the agent) and redacted from every error message.
type git struct {
	dir    string
	env    []string
	secret []string // strings to redact from output
	mu     sync.Mutex
}

func newGit(cfg *Config) *git {
	env := append([]string(nil), cfg.Env...)
	env = append(env,
		"GIT_TERMINAL_PROMPT=0", // a missing credential must fail, not wait for a tty
		"GIT_AUTHOR_NAME="+cfg.AuthorName, "GIT_AUTHOR_EMAIL="+cfg.AuthorEmail,
		"GIT_COMMITTER_NAME="+cfg.AuthorName, "GIT_COMMITTER_EMAIL="+cfg.AuthorEmail,
	)
	g := &git{dir: cfg.Workspace}
	// Command-scope config through the environment. safe.directory: the
	// workspace may be a volume owned by another uid than the runner's, and
	// git refuses such a repository unless protected config allows it.
	// core.hooksPath: hooks are files in the workspace the agent can write;
	// git runs them with this environment, token included. The runner's own
	// git commands run none.
	cfgs := [][2]string{{"safe.directory", cfg.Workspace}, {"core.hooksPath", "/dev/null"}}
	if cfg.GitToken != "" {
		basic := base64.StdEncoding.EncodeToString([]byte(cfg.GitUsername + ":" + cfg.GitToken))
		cfgs = append(cfgs, [2]string{"http.extraHeader", "Authorization: Basic " + basic})
		g.secret = []string{cfg.GitToken, basic}
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfgs)))
	for i, kv := range cfgs {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	g.env = env
	return g
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
		return "", fmt.Errorf("git %s: %v: %s", g.redact(args[0]), err, g.redact(msg))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (g *git) run(ctx context.Context, args ...string) (string, error) {
	return g.runIn(ctx, g.dir, args...)
}

// clone clones url into the (empty or missing) workspace.
func (g *git) clone(ctx context.Context, url string) error {
	_, err := g.runIn(ctx, "", "clone", "--quiet", "--", url, g.dir)
	return err
}

// checkout switches to branch: tracking origin/branch when the remote has it,
// else a new branch from HEAD.
func (g *git) checkout(ctx context.Context, branch string) error {
	if _, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/"+branch); err == nil {
		_, err := g.run(ctx, "checkout", "--quiet", "-B", branch, "--track", "origin/"+branch)
		return err
	}
	_, err := g.run(ctx, "checkout", "--quiet", "-b", branch)
	return err
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

// push pushes HEAD to branch at the request's repository URL, named
// explicitly rather than as "origin": the agent can edit .git/config, and
// the token's header goes wherever git connects. URL rewrites
// (url.*.insteadOf) in the local config are refused for the same reason.
func (g *git) push(ctx context.Context, repoURL, branch string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if out, err := g.run(ctx, "config", "--local", "--get-regexp", `^url\..*\.(push)?insteadof$`); err == nil && out != "" {
		return fmt.Errorf("refusing to push: the repository's .git/config rewrites URLs (%s); remove the url.*.insteadOf entries", g.redact(oneLine(out, 200)))
	}
	_, err := g.run(ctx, "push", "--quiet", repoURL, "HEAD:refs/heads/"+branch)
	return err
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
