package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultAPI is github.com's REST API base.
const DefaultAPI = "https://api.github.com"

// Remote is a hosted repository named by a remote URL.
type Remote struct {
	Host  string // web host, e.g. github.com (port kept when the URL had one)
	Owner string
	Repo  string // without .git
}

// HTTPSURL is the remote's https clone URL, the form the token push uses
// whatever form the user's remote has (ssh keys are the user's, not the
// daemon's).
func (r Remote) HTTPSURL() string {
	return "https://" + r.Host + "/" + r.Owner + "/" + r.Repo + ".git"
}

// CompareURL is the page on the remote's web host where a person opens
// the pull request of head onto base (GitHub's compare view).
func (r Remote) CompareURL(base, head string) string {
	return "https://" + r.Host + "/" + r.Owner + "/" + r.Repo + "/compare/" + base + "..." + head + "?expand=1"
}

// ParseRemote reads host, owner and repository from a remote URL in https,
// http, ssh:// or scp form (git@host:owner/repo.git).
func ParseRemote(raw string) (Remote, error) {
	var host, path string
	switch {
	case strings.Contains(raw, "://"):
		u, err := url.Parse(raw)
		if err != nil {
			return Remote{}, fmt.Errorf("parse remote URL %q: %w", raw, err)
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git+ssh":
		default:
			return Remote{}, fmt.Errorf("remote URL %q: scheme %q is not a hosted remote (want https or ssh)", raw, u.Scheme)
		}
		host, path = u.Host, u.Path
		if u.Scheme != "https" && u.Scheme != "http" {
			host = u.Hostname() // an ssh port says nothing about the web host
		}
	default:
		// scp form: [user@]host:path, where host has no slash before the colon.
		userHost, p, ok := strings.Cut(raw, ":")
		if !ok || userHost == "" || strings.Contains(userHost, "/") {
			return Remote{}, fmt.Errorf("remote %q is neither a URL nor host:owner/repo", raw)
		}
		host, path = userHost[strings.LastIndex(userHost, "@")+1:], p
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if host == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return Remote{}, fmt.Errorf("remote %q does not name host/owner/repo", raw)
	}
	repo := strings.TrimSuffix(parts[1], ".git")
	if repo == "" {
		return Remote{}, fmt.Errorf("remote %q has an empty repository name", raw)
	}
	return Remote{Host: strings.ToLower(host), Owner: parts[0], Repo: repo}, nil
}

// GitHub is the one part of the GitHub REST API publishing uses: pull
// requests. Token is the daemon's; it goes into the Authorization header
// only and never into an error or a log.
type GitHub struct {
	API    string // DefaultAPI when empty; for GitHub Enterprise https://<host>/api/v3
	Token  string
	Client *http.Client // a client with a 30s timeout when nil
}

// PullRequest is what OpenPullRequest sends.
type PullRequest struct {
	Title string `json:"title"`
	Head  string `json:"head"` // branch name in the same repository
	Base  string `json:"base"`
	Body  string `json:"body,omitempty"`
}

// APIError is an answer of the GitHub API other than success.
type APIError struct {
	Method, Path string
	Status       int
	Message      string // the API's message, with the messages of its errors list
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("GitHub API %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), msg)
}

// maxAnswer caps what is read of an API answer: pull request objects are a
// few KiB, an error body less.
const maxAnswer = 4 << 20

// OpenPullRequest opens pr on owner/repo and returns its html_url. When the
// API answers 422 (which it does for a pull request that already exists for
// the head branch) it looks the open one up by head and returns its URL, so
// publishing twice is harmless; if there is none, the 422 is the error.
func (g *GitHub) OpenPullRequest(ctx context.Context, owner, repo string, pr PullRequest) (string, error) {
	path := "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/pulls"
	body, err := json.Marshal(pr)
	if err != nil {
		return "", fmt.Errorf("encode pull request: %w", err)
	}
	var created struct {
		HTMLURL string `json:"html_url"`
	}
	err = g.do(ctx, http.MethodPost, path, body, &created)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity {
		q := url.Values{"head": {owner + ":" + pr.Head}, "state": {"open"}}
		var open []struct {
			HTMLURL string `json:"html_url"`
		}
		if lerr := g.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, &open); lerr != nil {
			return "", fmt.Errorf("open pull request for %s: %w; looking for an existing one failed too: %w", pr.Head, err, lerr)
		}
		if len(open) > 0 && open[0].HTMLURL != "" {
			return open[0].HTMLURL, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("open pull request for %s on %s/%s: %w", pr.Head, owner, repo, err)
	}
	if created.HTMLURL == "" {
		return "", fmt.Errorf("open pull request for %s on %s/%s: the API answer has no html_url", pr.Head, owner, repo)
	}
	return created.HTMLURL, nil
}

func (g *GitHub) do(ctx context.Context, method, path string, body []byte, into any) error {
	api := strings.TrimRight(g.API, "/")
	if api == "" {
		api = DefaultAPI
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, api+path, rd)
	if err != nil {
		return fmt.Errorf("GitHub API %s %s: %w (check the API base %q)", method, path, err, api)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "aimid")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.Token)
	}
	client := g.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error names the URL, never the headers.
		return fmt.Errorf("GitHub API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("GitHub API %s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: apiMessage(data)}
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("GitHub API %s %s: decode the %d answer: %w", method, path, resp.StatusCode, err)
	}
	return nil
}

// apiMessage pulls "message" and the errors' messages out of an API error
// body; a body that is not the API's JSON is quoted, cut short.
func apiMessage(data []byte) string {
	var e struct {
		Message string `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Field   string `json:"field"`
		} `json:"errors"`
	}
	if json.Unmarshal(data, &e) != nil || e.Message == "" {
		s := strings.TrimSpace(string(data))
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		return s
	}
	msg := e.Message
	for _, x := range e.Errors {
		switch {
		case x.Message != "":
			msg += "; " + x.Message
		case x.Code != "":
			msg += "; " + x.Field + " " + x.Code
		}
	}
	return msg
}
