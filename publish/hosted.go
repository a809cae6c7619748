package publish

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// Hosted pushes branches to the user's hosted GitHub remote and opens pull
// requests for them. The zero value with a token publishes to "origin" on
// github.com.
type Hosted struct {
	// RemoteName is the remote of the user's checkout to publish to
	// (default "origin").
	RemoteName string
	// GitHub holds the API base and the token; no token, no publishing.
	GitHub GitHub
	// WebHost is the host of the remotes GitHub.API serves: github.com for
	// the default API, else the API URL's host (GitHub Enterprise serves
	// https://<host>/api/v3 for repositories on <host>). A remote on any
	// other host is left alone: the token is not sent to it.
	WebHost string
	// Base is the pull request's base branch; default the remote's HEAD
	// branch as the checkout knows it (refs/remotes/<remote>/HEAD), else the
	// fallback the caller gives.
	Base string
}

// HostedResult is what Hosted.Publish did: a pull request URL, or why it
// did nothing (no token, no such remote, not a GitHub remote).
type HostedResult struct {
	PRURL   string
	Skipped string
}

// Publish pushes refs/heads/<branch> of the checkout at repoPath to the
// hosted remote and opens a pull request (or finds the open one) for it.
// fallbackBase is the base branch when neither Base nor the remote's HEAD
// names one; body is the pull request's description.
func (h Hosted) Publish(ctx context.Context, g gitcmd.Git, repoPath, branch, fallbackBase, body string) (HostedResult, error) {
	return h.publish(ctx, g, repoPath, branch, fallbackBase, body, true)
}

// PullRequest opens (or finds) the pull request of branch, which the
// caller pushed to the hosted remote of the checkout at repoPath already:
// it pushes nothing. Skipped says why there is none (no token, no such
// remote, not a GitHub remote).
func (h Hosted) PullRequest(ctx context.Context, g gitcmd.Git, repoPath, branch, fallbackBase, body string) (HostedResult, error) {
	return h.publish(ctx, g, repoPath, branch, fallbackBase, body, false)
}

// publish is Publish, or PullRequest without push.
func (h Hosted) publish(ctx context.Context, g gitcmd.Git, repoPath, branch, fallbackBase, body string, push bool) (HostedResult, error) {
	if err := gitref.CheckBranch(branch); err != nil {
		return HostedResult{}, fmt.Errorf("publish: %w: %w", ErrBadBranch, err)
	}
	remote, name, skipped, err := h.target(ctx, g, repoPath)
	if err != nil || skipped != "" {
		return HostedResult{Skipped: skipped}, err
	}
	if !push {
		return h.open(ctx, g, repoPath, remote, name, branch, fallbackBase, body)
	}
	// The token travels as an http.<url>.extraHeader given through the
	// environment (GIT_CONFIG_COUNT, git >= 2.31): not on the command line,
	// not in any config file, and sent to this remote's URL only.
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + h.GitHub.Token))
	pushGit := gitcmd.Git{Env: append(append([]string(nil), g.Env...),
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.https://"+remote.Host+"/.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic,
	)}
	ref := "refs/heads/" + branch
	if _, err := pushGit.Run(ctx, repoPath, "push", "--quiet", remote.HTTPSURL(), ref+":"+ref); err != nil {
		return HostedResult{}, fmt.Errorf("push %s to %s (remote %q): %w", branch, remote.HTTPSURL(), name, err)
	}
	return h.open(ctx, g, repoPath, remote, name, branch, fallbackBase, body)
}

// target is the checkout's hosted remote the token may go to, and its
// name; skipped says why there is none.
func (h Hosted) target(ctx context.Context, g gitcmd.Git, repoPath string) (remote Remote, name, skipped string, err error) {
	if h.GitHub.Token == "" {
		return Remote{}, "", "no GitHub token in the daemon's environment", nil
	}
	name = h.RemoteName
	if name == "" {
		name = "origin"
	}
	// The URL as configured: `remote get-url` would apply insteadOf
	// rewrites, and owner/repo are read from what the user wrote.
	raw, err := g.Run(ctx, repoPath, "config", "--get", "remote."+name+".url")
	if err != nil || raw == "" {
		return Remote{}, name, fmt.Sprintf("the checkout has no remote %q", name), nil
	}
	remote, err = ParseRemote(raw)
	if err != nil {
		return Remote{}, name, fmt.Sprintf("remote %q is not a hosted repository: %v", name, err), nil
	}
	webHost, err := h.webHost()
	if err != nil {
		return Remote{}, name, "", err
	}
	if !strings.EqualFold(remote.Host, webHost) {
		return Remote{}, name, fmt.Sprintf("remote %q is on %s, the GitHub API serves %s", name, remote.Host, webHost), nil
	}
	return remote, name, "", nil
}

// open opens (or finds) branch's pull request on remote.
func (h Hosted) open(ctx context.Context, g gitcmd.Git, repoPath string, remote Remote, name, branch, fallbackBase, body string) (HostedResult, error) {
	base := h.Base
	if base == "" {
		if head, err := g.Run(ctx, repoPath, "symbolic-ref", "--quiet", "--short", "refs/remotes/"+name+"/HEAD"); err == nil {
			base = strings.TrimPrefix(head, name+"/")
		}
	}
	if base == "" {
		base = fallbackBase
	}
	if base == "" {
		base = "main"
	}
	gh := h.GitHub
	prURL, err := gh.OpenPullRequest(ctx, remote.Owner, remote.Repo, PullRequest{
		Title: "aimi swarm: " + branch,
		Head:  branch,
		Base:  base,
		Body:  body,
	})
	if err != nil {
		return HostedResult{}, err
	}
	return HostedResult{PRURL: prURL}, nil
}

func (h Hosted) webHost() (string, error) {
	if h.WebHost != "" {
		return h.WebHost, nil
	}
	api := h.GitHub.API
	if api == "" || strings.TrimRight(api, "/") == DefaultAPI {
		return "github.com", nil
	}
	u, err := url.Parse(api)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("GitHub API base %q is not a URL (want e.g. https://github.example.com/api/v3)", api)
	}
	return u.Host, nil
}
