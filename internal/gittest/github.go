package gittest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// GitHubPulls plays the GitHub REST API for the one endpoint publishing
// uses, POST /repos/<owner>/<repo>/pulls, for one repository: 201 with
// html_url https://<web host>/<owner>/<repo>/pull/<n> (n counts from 1)
// when the bearer token is right, 401 without it, 404 for anything else.
type GitHubPulls struct {
	*httptest.Server
	mu       sync.Mutex
	requests []map[string]any
}

// NewGitHubPulls serves the API for ownerRepo ("acme/widgets") until the
// test ends. webHost "" answers with the API's own host, which is the web
// host the daemon assumes for a non-default API.
func NewGitHubPulls(t testing.TB, token, ownerRepo, webHost string) *GitHubPulls {
	g := &GitHubPulls{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/repos/"+ownerRepo+"/pulls" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var pr map[string]any
		_ = json.Unmarshal(body, &pr)
		g.mu.Lock()
		g.requests = append(g.requests, pr)
		n := len(g.requests)
		g.mu.Unlock()
		host := webHost
		if host == "" {
			host = r.Host
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"html_url":"https://%s/%s/pull/%d","number":%d}`, host, ownerRepo, n, n)
	}))
	t.Cleanup(g.Close)
	return g
}

// Requests returns the bodies of the pull requests asked for so far.
func (g *GitHubPulls) Requests() []map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]map[string]any(nil), g.requests...)
}
