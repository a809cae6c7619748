package gitserve

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// A push bigger than git's http.postBuffer goes as a chunked request body
// (no Content-Length): the gate must hand it on whole.
func TestLargeChunkedPushGoesThrough(t *testing.T) {
	ctx := t.Context()
	repo := newRepo(t)
	s, logs := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-big", Container: "aimi-big", Branch: "big"}, "")
	if err != nil {
		t.Fatal(err)
	}
	env := clientEnv(g.CAFile, basic(g.Token))
	work := filepath.Join(t.TempDir(), "w")
	if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	blob := make([]byte, 3<<20) // random: does not compress below the 1 MiB post buffer
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, work, "add", "big.bin")
	mustGit(t, work, "commit", "-q", "-m", "big")
	tip := mustGit(t, work, "rev-parse", "HEAD")
	if out, err := gitOut(work, append(env, "GIT_TRACE_CURL_NO_DATA=1"), "push", "-q", "origin", "HEAD:refs/heads/big"); err != nil {
		t.Fatalf("push: %v\n%s\nservice log:\n%s", err, out, logs)
	}
	if got := mustGit(t, s.mirrorPath("swarm-big"), "rev-parse", "refs/heads/big"); got != tip {
		t.Fatalf("mirror big = %s, want %s", got, tip)
	}

	// A large push to a refused ref: the body is drained, so git reads the
	// refusal instead of failing on a broken pipe.
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big2.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, work, "add", "big2.bin")
	mustGit(t, work, "commit", "-q", "-m", "big2")
	before := snapshot(t, s.mirrorPath("swarm-big"))
	out, err := gitOut(work, env, "push", "origin", "HEAD:refs/heads/main")
	if err == nil || !strings.Contains(out, "may push only refs/heads/big") {
		t.Fatalf("large refused push: %v\n%s", err, out)
	}
	if snapshot(t, s.mirrorPath("swarm-big")) != before {
		t.Fatal("mirror changed by a refused push")
	}
}

// The handler, called directly: a gzip-encoded push body is inflated
// before its commands are checked; malformed bodies and wrong methods are
// refused with plain-text reasons; a refusal report is well-formed.
func TestHandlerRefusals(t *testing.T) {
	ctx := t.Context()
	repo := newRepo(t)
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-h", Container: "aimi-h", Branch: "mine"}, "")
	if err != nil {
		t.Fatal(err)
	}
	mirror := s.mirrorPath("swarm-h")
	before := snapshot(t, mirror)
	gz := func(b string) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write([]byte(b))
		w.Close()
		return buf.Bytes()
	}
	cmd := pkt(oidA+" "+oidB+" refs/heads/main\x00report-status side-band-64k\n") + "0000"
	tests := []struct {
		name     string
		method   string
		path     string
		body     []byte
		gzip     bool
		auth     string
		status   int
		contains string
	}{
		{"gzip push to another ref gets a refusal report", "POST", "/swarm-h.git/git-receive-pack", gz(cmd), true, "Bearer " + g.Token, 200, "ng refs/heads/main aimi: this container may push only refs/heads/mine"},
		{"plain push to another ref gets a refusal report", "POST", "/swarm-h.git/git-receive-pack", []byte(cmd), false, "Bearer " + g.Token, 200, "unpack ok"},
		{"broken gzip is refused", "POST", "/swarm-h.git/git-receive-pack", []byte("not gzip"), true, "Bearer " + g.Token, 400, "not valid gzip"},
		{"malformed command list is refused", "POST", "/swarm-h.git/git-receive-pack", []byte("zzzz"), false, "Bearer " + g.Token, 400, "push refused"},
		{"GET of receive-pack is refused", "GET", "/swarm-h.git/git-receive-pack", nil, false, "Bearer " + g.Token, 403, "only the smart HTTP"},
		{"no token", "POST", "/swarm-h.git/git-receive-pack", []byte(cmd), false, "", 401, "valid container token"},
		{"Basic with an empty password", "GET", "/swarm-h.git/info/refs?service=git-upload-pack", nil, false, "Basic eDo=", 401, "valid container token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(ctx, tc.method, "https://127.0.0.1"+tc.path, bytes.NewReader(tc.body))
			if tc.gzip {
				req.Header.Set("Content-Encoding", "gzip")
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.contains) {
				t.Fatalf("%d %q; want %d containing %q", rec.Code, rec.Body.String(), tc.status, tc.contains)
			}
			if tc.status == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate: git would not retry with credentials")
			}
		})
	}
	if after := snapshot(t, mirror); after != before {
		t.Fatal("mirror changed")
	}
}
