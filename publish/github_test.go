package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestParseRemote(t *testing.T) {
	tests := []struct {
		raw  string
		want Remote
		bad  bool
	}{
		{raw: "https://github.com/acme/widgets.git", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "https://github.com/acme/widgets", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "https://user@github.com/acme/widgets.git/", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "https://ghe.example.com:8443/acme/widgets.git", want: Remote{"ghe.example.com:8443", "acme", "widgets"}},
		{raw: "git@github.com:acme/widgets.git", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "github.com:acme/widgets", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "ssh://git@GitHub.com:22/acme/widgets.git", want: Remote{"github.com", "acme", "widgets"}},
		{raw: "/srv/git/widgets.git", bad: true},
		{raw: "file:///srv/acme/widgets.git", bad: true},
		{raw: "https://gitlab.com/group/sub/widgets.git", bad: true},
		{raw: "https://github.com/acme", bad: true},
		{raw: "https://github.com/acme/.git", bad: true},
		{raw: "", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := ParseRemote(tc.raw)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseRemote = %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRemote = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if got := (Remote{"github.com", "a", "b"}).HTTPSURL(); got != "https://github.com/a/b.git" {
		t.Fatalf("HTTPSURL = %s", got)
	}
}

// fakeGitHub implements POST and GET /repos/{o}/{r}/pulls the way the API
// answers: 201 with html_url, 422 when an open pull request for the head
// exists, and the list filtered by head.
type fakeGitHub struct {
	mu     sync.Mutex
	token  string
	open   map[string]string // "owner:branch" -> html_url
	posts  []PullRequest
	status int // forced answer status for POST, 0 = behave
	body   string
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 4 || parts[0] != "repos" || parts[3] != "pulls" {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
		return
	}
	owner, repo := parts[1], parts[2]
	switch r.Method {
	case http.MethodPost:
		var pr PullRequest
		if err := json.NewDecoder(r.Body).Decode(&pr); err != nil || pr.Head == "" || pr.Base == "" || pr.Title == "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"message":"Problems parsing JSON"}`)
			return
		}
		f.posts = append(f.posts, pr)
		if f.status != 0 {
			w.WriteHeader(f.status)
			fmt.Fprint(w, f.body)
			return
		}
		key := owner + ":" + pr.Head
		if _, ok := f.open[key]; ok {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for %s."}]}`, key)
			return
		}
		url := fmt.Sprintf("https://github.example/%s/%s/pull/%d", owner, repo, len(f.open)+1)
		f.open[key] = url
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"number":%d,"html_url":%q,"state":"open"}`, len(f.open), url)
	case http.MethodGet:
		var list []map[string]string
		if url, ok := f.open[r.URL.Query().Get("head")]; ok && r.URL.Query().Get("state") == "open" {
			list = append(list, map[string]string{"html_url": url})
		}
		json.NewEncoder(w).Encode(list)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func newFakeGitHub(t *testing.T, token string) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{token: token, open: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func TestOpenPullRequest(t *testing.T) {
	ctx := t.Context()
	const token = "ghp_testtokentesttokentesttoken0001"
	fake, srv := newFakeGitHub(t, token)
	gh := &GitHub{API: srv.URL, Token: token}
	pr := PullRequest{Title: "t", Head: "feat", Base: "main", Body: "b"}

	url, err := gh.OpenPullRequest(ctx, "acme", "widgets", pr)
	if err != nil || url != "https://github.example/acme/widgets/pull/1" {
		t.Fatalf("first open = %q, %v", url, err)
	}
	t.Run("an existing pull request is found, not an error", func(t *testing.T) {
		again, err := gh.OpenPullRequest(ctx, "acme", "widgets", pr)
		if err != nil || again != url {
			t.Fatalf("second open = %q, %v; want %q", again, err, url)
		}
	})
	t.Run("API errors are clear errors with status and message", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			gh     *GitHub
			status int
			body   string
			want   []string
		}{
			{"bad token", &GitHub{API: srv.URL, Token: "wrong"}, 0, "", []string{"401", "Bad credentials", "POST /repos/acme/widgets/pulls"}},
			{"422 without an open pull request", gh, 422, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"No commits between main and feat2"}]}`, []string{"422", "No commits between main and feat2"}},
			{"server error with a non-JSON body", gh, 502, "<html>bad gateway</html>", []string{"502", "bad gateway"}},
			{"success without html_url", gh, 201, `{}`, []string{"no html_url"}},
			{"success with a body that is not JSON", gh, 201, `nope`, []string{"decode"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				fake.mu.Lock()
				fake.status, fake.body = tc.status, tc.body
				fake.mu.Unlock()
				defer func() { fake.mu.Lock(); fake.status = 0; fake.mu.Unlock() }()
				_, err := tc.gh.OpenPullRequest(ctx, "acme", "widgets", PullRequest{Title: "t", Head: "feat2", Base: "main"})
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(err.Error(), token) {
					t.Error("the token is in the error")
				}
			})
		}
		var apiErr *APIError
		_, err := (&GitHub{API: srv.URL, Token: "wrong"}).OpenPullRequest(ctx, "acme", "widgets", pr)
		if !errors.As(err, &apiErr) || apiErr.Status != 401 {
			t.Fatalf("err = %v, want an *APIError 401", err)
		}
	})
	t.Run("unreachable API is an error, not a crash", func(t *testing.T) {
		_, err := (&GitHub{API: "http://127.0.0.1:1", Token: token}).OpenPullRequest(ctx, "acme", "widgets", pr)
		if err == nil || strings.Contains(err.Error(), token) {
			t.Fatalf("err = %v", err)
		}
	})
}

// hostedFixture: a checkout whose origin is https://github.example/acme/
// widgets.git, rewritten by the checkout's own config to a local bare
// repository (the "hosted" side), and a fake API.
func hostedFixture(t *testing.T, token string) (user, hostedBare string, fake *fakeGitHub, api string) {
	t.Helper()
	user = newRepo(t, false)
	root := t.TempDir()
	hostedBare = filepath.Join(root, "acme", "widgets.git")
	if err := os.MkdirAll(filepath.Dir(hostedBare), 0o755); err != nil {
		t.Fatal(err)
	}
	mustGit(t, "", "init", "-q", "--bare", "-b", "main", hostedBare)
	mustGit(t, user, "remote", "add", "origin", "https://github.example/acme/widgets.git")
	mustGit(t, user, "config", "url.file://"+root+"/.insteadOf", "https://github.example/")
	mustGit(t, user, "push", "-q", "origin", "main")
	mustGit(t, user, "fetch", "-q", "origin")
	mustGit(t, user, "remote", "set-head", "origin", "main")
	fake, srv := newFakeGitHub(t, token)
	return user, hostedBare, fake, srv.URL
}

func TestHostedPublish(t *testing.T) {
	ctx := t.Context()
	const token = "ghp_hostedtokenhostedtoken000002"
	user, bare, fake, api := hostedFixture(t, token)
	mustGit(t, user, "branch", "feat")
	mustGit(t, user, "checkout", "-q", "feat")
	tip := commit(t, user, "work.txt")
	mustGit(t, user, "checkout", "-q", "main")
	h := Hosted{GitHub: GitHub{API: api, Token: token}, WebHost: "github.example"}

	res, err := h.Publish(ctx, testGit, user, "feat", "develop", "body text")
	if err != nil {
		t.Fatal(err)
	}
	if res.PRURL != "https://github.example/acme/widgets/pull/1" || res.Skipped != "" {
		t.Fatalf("result = %+v", res)
	}
	if got := mustGit(t, bare, "rev-parse", "refs/heads/feat"); got != tip {
		t.Fatalf("hosted feat = %s, want %s", got, tip)
	}
	fake.mu.Lock()
	post := fake.posts[0]
	fake.mu.Unlock()
	if post.Head != "feat" || post.Base != "main" || post.Body != "body text" {
		t.Fatalf("posted %+v; want head feat, base main (the remote's HEAD)", post)
	}
	if again, err := h.Publish(ctx, testGit, user, "feat", "", ""); err != nil || again.PRURL != res.PRURL {
		t.Fatalf("publishing again = %+v, %v", again, err)
	}

	for _, tc := range []struct {
		name string
		h    Hosted
		want string
	}{
		{"no token", Hosted{GitHub: GitHub{API: api}, WebHost: "github.example"}, "no GitHub token"},
		{"no such remote", Hosted{RemoteName: "upstream", GitHub: GitHub{API: api, Token: token}, WebHost: "github.example"}, "no remote"},
		{"remote on another host", Hosted{GitHub: GitHub{API: api, Token: token}}, "the GitHub API serves"},
	} {
		t.Run("skipped: "+tc.name, func(t *testing.T) {
			res, err := tc.h.Publish(ctx, testGit, user, "feat", "", "")
			if err != nil || !strings.Contains(res.Skipped, tc.want) {
				t.Fatalf("result = %+v, %v; want skipped with %q", res, err, tc.want)
			}
		})
	}
	t.Run("API error after the push is a clear error", func(t *testing.T) {
		bad := Hosted{GitHub: GitHub{API: api, Token: "wrong"}, WebHost: "github.example"}
		_, err := bad.Publish(ctx, testGit, user, "feat", "", "")
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Bad credentials") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestHostedWebHost(t *testing.T) {
	for api, want := range map[string]string{"": "github.com", DefaultAPI: "github.com", DefaultAPI + "/": "github.com",
		"https://ghe.example.com/api/v3": "ghe.example.com"} {
		got, err := Hosted{GitHub: GitHub{API: api}}.webHost()
		if err != nil || got != want {
			t.Errorf("webHost(%q) = %q, %v; want %q", api, got, err, want)
		}
	}
}

// TestHostedPullRequestPushesNothing: the pull request of a branch the
// caller pushed itself is opened with the base given, and nothing is
// pushed; without a token it is skipped, saying why.
func TestHostedPullRequestPushesNothing(t *testing.T) {
	ctx := t.Context()
	const token = "ghp_hostedtokenhostedtoken000003"
	user, bare, fake, api := hostedFixture(t, token)
	mustGit(t, user, "branch", "aimi/land/abc")
	h := Hosted{GitHub: GitHub{API: api, Token: token}, WebHost: "github.example", Base: "main"}
	res, err := h.PullRequest(ctx, testGit, user, "aimi/land/abc", "", "the body")
	if err != nil || res.PRURL != "https://github.example/acme/widgets/pull/1" {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if out, err := exec.Command("git", "-C", bare, "rev-parse", "--verify", "--quiet", "refs/heads/aimi/land/abc").Output(); err == nil {
		t.Errorf("PullRequest pushed the branch (%s)", out)
	}
	fake.mu.Lock()
	post := fake.posts[0]
	fake.mu.Unlock()
	if post.Head != "aimi/land/abc" || post.Base != "main" || post.Body != "the body" {
		t.Errorf("posted %+v", post)
	}
	h.GitHub.Token = ""
	if res, err := h.PullRequest(ctx, testGit, user, "aimi/land/abc", "", ""); err != nil || !strings.Contains(res.Skipped, "no GitHub token") {
		t.Errorf("without a token: %+v, %v", res, err)
	}
	if got := (Remote{Host: "github.example", Owner: "acme", Repo: "widgets"}).CompareURL("main", "aimi/land/abc"); got != "https://github.example/acme/widgets/compare/main...aimi/land/abc?expand=1" {
		t.Errorf("CompareURL = %s", got)
	}
}
