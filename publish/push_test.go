package publish

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// The token reaches the hosted remote as git's Basic credentials, through
// the environment only, and only for that remote's host: a TLS server
// standing in for github.com records what git sends.
func TestHostedPushSendsTheTokenToTheRemoteOnly(t *testing.T) {
	const token = "ghp_pushheadertoken000000000000004"
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "not a git server", http.StatusNotFound)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	user := newRepo(t, false)
	mustGit(t, user, "remote", "add", "origin", "https://"+host+"/acme/widgets.git")
	mustGit(t, user, "branch", "feat")

	g := gitcmd.Git{Env: append(append([]string(nil), testEnv...), "GIT_SSL_CAINFO="+caFile)}
	h := Hosted{GitHub: GitHub{API: "http://127.0.0.1:1", Token: token}, WebHost: host}
	_, err := h.Publish(t.Context(), g, user, "feat", "", "")
	if err == nil || !strings.Contains(err.Error(), "push feat to https://"+host+"/acme/widgets.git") {
		t.Fatalf("err = %v, want the push to fail against the stand-in", err)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))) {
		t.Fatal("the token is in the error")
	}
	want := "GET /acme/widgets.git/info/refs Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	mu.Lock()
	defer mu.Unlock()
	if len(auths) == 0 || auths[0] != want {
		t.Fatalf("requests = %q, want first %q", auths, want)
	}
	// Nothing of it stayed in the checkout's config.
	if cfg, _ := os.ReadFile(filepath.Join(user, ".git", "config")); strings.Contains(string(cfg), token) || strings.Contains(string(cfg), "extraHeader") {
		t.Fatal("the token was written into the checkout's config")
	}
}
