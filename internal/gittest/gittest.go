package gittest

import (
	"encoding/pem"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Server is a git https server with one bare repository.
type Server struct {
	URL    string // clone URL of the repository (https://127.0.0.1:port/repo.git)
	Bare   string // path of the bare repository
	CAFile string // PEM of the server's certificate, for GIT_SSL_CAINFO
	Token  string // when set, requests must carry it (Basic password or Bearer)

	mu       sync.Mutex
	extra    map[string]http.Handler
	requests []string
}

// Requests lists the requests served so far, "METHOD path?query" each,
// in order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Handle serves path with h instead of git (after the token check), as
// the daemon's git service serves its own paths beside the repositories.
func (s *Server) Handle(path string, h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.extra == nil {
		s.extra = map[string]http.Handler{}
	}
	s.extra[path] = h
}

// Git runs git in dir and fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// New makes a bare repository whose main branch has one commit holding
// files (path -> content), and serves it over https until the test ends.
func New(t testing.TB, token string, files map[string]string) *Server {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	Git(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	Git(t, bare, "config", "http.receivepack", "true")
	src := filepath.Join(dir, "src")
	Git(t, dir, "init", "-q", "-b", "main", src)
	for p, c := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, src, "add", "-A")
	Git(t, src, "commit", "-q", "-m", "initial")
	Git(t, src, "push", "-q", bare, "main")

	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		// REMOTE_USER: http-backend refuses pushes from anonymous users.
		Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "REMOTE_USER=test"},
	}
	s := &Server{Bare: bare, Token: token}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if token != "" {
			_, pass, ok := r.BasicAuth()
			bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !(ok && pass == token) && bearer != token {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		r.Header.Del("Authorization")
		s.mu.Lock()
		h := s.extra[r.URL.Path]
		s.mu.Unlock()
		if h != nil {
			h.ServeHTTP(w, r)
			return
		}
		if len(r.TransferEncoding) > 0 {
			// net/http/cgi answers 400 to a chunked body (git sends one
			// past http.postBuffer); git http-backend reads a body of
			// unknown length to its end, as the daemon's service does.
			r.TransferEncoding = nil
			r.ContentLength = -1
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	s.URL = srv.URL + "/repo.git"
	s.CAFile = ca
	return s
}

// Log returns `git log --format=%s <branch>` of the bare repository, newest
// first, or nil when the branch does not exist.
func (s *Server) Log(t testing.TB, branch string) []string {
	t.Helper()
	cmd := exec.Command("git", "log", "--format=%s", branch)
	cmd.Dir = s.Bare
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// Show returns the content of path at branch in the bare repository.
func (s *Server) Show(t testing.TB, branch, path string) string {
	t.Helper()
	return Git(t, s.Bare, "show", branch+":"+path)
}
