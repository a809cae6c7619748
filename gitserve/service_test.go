package gitserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/daemonca"
	"github.com/aimi-tools/swarm/internal/syncbuf"
)

func bearer(tok string) string { return "Authorization: Bearer " + tok }

func basic(tok string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("aimi:"+tok))
}

// TestServiceOverHTTPS drives real git clone and push over https against
// the service on 127.0.0.1: the granted ref goes through, every other push
// and every request without a fitting token is refused with git-visible
// reasons, and the repository is unchanged by every refusal.
func TestServiceOverHTTPS(t *testing.T) {
	ctx := ctxT(t)
	r := newHTTPSRig(t, ctx)
	work := r.pushTheGrantedBranch(t, ctx)

	// Unpushed work, so that every refused push below has something to send.
	commitFile(t, work, "a3.txt", "story 3\n")
	for _, tc := range r.refusedCases(t, work) {
		t.Run(tc.name, func(t *testing.T) { r.checkRefused(t, tc) })
	}

	t.Run("dumb http and other paths are refused", func(t *testing.T) { r.checkDumbHTTPRefused(t, ctx) })

	// The user's checkout was never written by any of it.
	if got := mustGit(t, r.repo, "for-each-ref", "--format=%(refname)"); got != "refs/heads/main" {
		t.Errorf("user's checkout refs = %q, want only main", got)
	}

	// Secrets never reach the logs or the grants file.
	r.checkNoSecretInLogsOrGrants(t)
}

// httpsRig is TestServiceOverHTTPS's service listening on 127.0.0.1 with
// its grants: a and b in swarm-1 of repo, c in swarm-2 of another
// repository, and revoked in swarm-1, revoked at once.
type httpsRig struct {
	s                *Service
	logs             *syncbuf.Buffer
	repo             string
	a, b, c, revoked Grant
	mirror           string
}

// newHTTPSRig starts the service and makes the grants, checking their
// addresses and tokens.
func newHTTPSRig(t *testing.T, ctx context.Context) *httpsRig {
	repo := newRepo(t)
	otherRepo := newRepo(t)
	s, logs := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatalf("second ListenOn on the same ip: %v", err)
	}
	a, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-1", Container: "aimi-a", Branch: "feat/a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-1", Container: "aimi-b", Branch: "feat-b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Grant(ctx, contract.ContainerBranch{Repo: otherRepo, Swarm: "swarm-2", Container: "aimi-c", Branch: "feat-c"}, "")
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-1", Container: "aimi-gone", Branch: "feat-gone"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Revoke(contract.Sandbox{Swarm: "swarm-1", Container: "aimi-gone"})
	if !strings.HasPrefix(a.RepoURL, "https://127.0.0.1:") || !strings.HasSuffix(a.RepoURL, "/swarm-1.git") {
		t.Fatalf("RepoURL = %q", a.RepoURL)
	}
	if a.Token == b.Token || len(a.Token) != 64 {
		t.Fatalf("tokens not distinct 32-byte hex: %d chars", len(a.Token))
	}
	return &httpsRig{s: s, logs: logs, repo: repo, a: a, b: b, c: c, revoked: revoked, mirror: s.mirrorPath("swarm-1")}
}

// pushTheGrantedBranch clones with a's token (Bearer and Basic), commits on
// its branch and pushes twice; it returns the workspace.
func (r *httpsRig) pushTheGrantedBranch(t *testing.T, ctx context.Context) string {
	// A container's workspace: clone with its token, commit on its branch.
	work := filepath.Join(t.TempDir(), "work")
	if out, err := gitOut("", clientEnv(r.a.CAFile, bearer(r.a.Token)), "clone", "-q", r.a.RepoURL, work); err != nil {
		t.Fatalf("clone with a Bearer token: %v\n%s", err, out)
	}
	if out, err := gitOut("", clientEnv(r.a.CAFile, basic(r.a.Token)), "clone", "-q", r.a.RepoURL, filepath.Join(t.TempDir(), "w2")); err != nil {
		t.Fatalf("clone with a Basic token: %v\n%s", err, out)
	}
	mustGit(t, work, "checkout", "-q", "-b", "feat/a")
	tip := commitFile(t, work, "a.txt", "story 1\n")

	if _, err := r.s.Unreceived(ctx, contract.ContainerBranch{Repo: r.repo, Swarm: "swarm-1", Container: "aimi-a", Branch: "feat/a"}); err == nil {
		t.Fatal("Unreceived before any push: want ErrNothingReceived")
	}
	if out, err := gitOut(work, clientEnv(r.a.CAFile, bearer(r.a.Token)), "push", "-q", "origin", "HEAD:refs/heads/feat/a"); err != nil {
		t.Fatalf("push of the granted branch: %v\n%s", err, out)
	}
	if got := mustGit(t, r.mirror, "rev-parse", "refs/heads/feat/a"); got != tip {
		t.Fatalf("mirror feat/a = %s, want %s", got, tip)
	}
	if commits, err := r.s.Unreceived(ctx, contract.ContainerBranch{Repo: r.repo, Swarm: "swarm-1", Container: "aimi-a", Branch: "feat/a"}); err != nil || len(commits) != 0 {
		t.Fatalf("Unreceived after the push = %v, %v; want none", commits, err)
	}
	// More work on top is accepted too (fast-forward).
	commitFile(t, work, "a2.txt", "story 2\n")
	if out, err := gitOut(work, clientEnv(r.a.CAFile, bearer(r.a.Token)), "push", "-q", "origin", "HEAD:refs/heads/feat/a"); err != nil {
		t.Fatalf("second push of the granted branch: %v\n%s", err, out)
	}
	return work
}

// refusedCase is a git command against the service that must be refused
// with want in git's output.
type refusedCase struct {
	name string
	dir  string
	env  []string
	args []string
	want string // in git's output
}

// refusedCases are the requests TestServiceOverHTTPS checks are refused;
// the pushes run in work.
func (r *httpsRig) refusedCases(t *testing.T, work string) []refusedCase {
	a, b, c, revoked := r.a, r.b, r.c, r.revoked
	otherURL := strings.Replace(a.RepoURL, "swarm-1", "swarm-2", 1)
	return []refusedCase{
		{"push to another container's branch is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/feat-b"}, "may push only refs/heads/feat/a"},
		{"push to main is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/main"}, "may push only refs/heads/feat/a"},
		{"push of a tag is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "origin", "HEAD:refs/tags/v1"}, "may push only refs/heads/feat/a"},
		{"push of the granted ref with another ref is refused whole", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/feat/a", "HEAD:refs/heads/other"}, "refused with the rest of this push"},
		{"deleting the granted branch is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "origin", ":refs/heads/feat/a"}, "deleting refs/heads/feat/a is refused"},
		{"non-fast-forward push of the granted branch is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", "--force", "origin", "HEAD~2:refs/heads/feat/a"}, "rejected"},
		{"another container's token cannot push this branch", work, clientEnv(a.CAFile, bearer(b.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/feat/a"}, "may push only refs/heads/feat-b"},
		{"push without a token is refused", work, clientEnv(a.CAFile, ""),
			[]string{"push", "origin", "HEAD:refs/heads/feat/a"}, "could not read Username"},
		{"push with a wrong token is refused", work, clientEnv(a.CAFile, bearer(strings.Repeat("0", 64))),
			[]string{"push", "origin", "HEAD:refs/heads/feat/a"}, "could not read Username"},
		{"push with a wrong Basic password is refused", work, clientEnv(a.CAFile, basic("nope")),
			[]string{"push", "origin", "HEAD:refs/heads/feat/a"}, "could not read Username"},
		{"push with a revoked token is refused", work, clientEnv(a.CAFile, bearer(revoked.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/feat-gone"}, "could not read Username"},
		{"clone without a token is refused", "", clientEnv(a.CAFile, ""),
			[]string{"clone", a.RepoURL, filepath.Join(t.TempDir(), "x")}, "could not read Username"},
		{"clone of another swarm's repository is refused", "", clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"clone", otherURL, filepath.Join(t.TempDir(), "x")}, "own swarm's repository only"},
		{"push into another swarm's repository is refused", work, clientEnv(a.CAFile, bearer(a.Token)),
			[]string{"push", otherURL, "HEAD:refs/heads/feat/a"}, "own swarm's repository only"},
		{"the other swarm's token cannot push here", work, clientEnv(a.CAFile, bearer(c.Token)),
			[]string{"push", "origin", "HEAD:refs/heads/feat-c"}, "own swarm's repository only"},
		{"a client without the CA does not connect", "", []string{"GIT_SSL_CAINFO=" + os.DevNull},
			[]string{"ls-remote", a.RepoURL}, "unable to access"},
	}
}

// checkRefused runs tc and checks git failed saying tc.want and neither
// swarm's repository changed.
func (r *httpsRig) checkRefused(t *testing.T, tc refusedCase) {
	s, mirror := r.s, r.mirror
	before, beforeOther := snapshot(t, mirror), snapshot(t, s.mirrorPath("swarm-2"))
	out, err := gitOut(tc.dir, tc.env, tc.args...)
	if err == nil {
		t.Fatalf("git %v succeeded, want refused\n%s", tc.args, out)
	}
	if !strings.Contains(out, tc.want) {
		t.Errorf("git output lacks %q:\n%s", tc.want, out)
	}
	if after := snapshot(t, mirror); after != before {
		t.Errorf("repository changed by a refused request:\nbefore %s\nafter %s", before, after)
	}
	if after := snapshot(t, s.mirrorPath("swarm-2")); after != beforeOther {
		t.Errorf("other swarm's repository changed by a refused request")
	}
}

// checkDumbHTTPRefused checks that a valid token gets 403 for the dumb
// http protocol's paths and for any path outside the smart protocol.
func (r *httpsRig) checkDumbHTTPRefused(t *testing.T, ctx context.Context) {
	s, a := r.s, r.a
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := strings.TrimSuffix(a.RepoURL, "/swarm-1.git")
	for _, p := range []string{"/swarm-1.git/HEAD", "/swarm-1.git/objects/info/packs", "/swarm-1.git/info/refs", "/swarm-1.git/config", "/swarm-1.git/../swarm-2.git/info/refs?service=git-upload-pack"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		req.Header.Set("Authorization", "Bearer "+a.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s = %d, want 403", p, resp.StatusCode)
		}
	}
}

// checkNoSecretInLogsOrGrants checks no token and neither half of the CA
// appears in the service's logs or its grants file, and the logs name no
// authorization header.
func (r *httpsRig) checkNoSecretInLogsOrGrants(t *testing.T) {
	s, logs, a, b, c, revoked := r.s, r.logs, r.a, r.b, r.c, r.revoked
	caKey, err := os.ReadFile(filepath.Join(s.dir, daemonca.KeyName))
	if err != nil {
		t.Fatal(err)
	}
	grants, err := os.ReadFile(filepath.Join(s.dir, stateName))
	if err != nil {
		t.Fatal(err)
	}
	log := logs.String()
	if !strings.Contains(log, "push refused") || !strings.Contains(log, "push received") {
		t.Fatalf("logs lack the push events, is the capture working?\n%s", log)
	}
	for name, secret := range map[string]string{"token a": a.Token, "token b": b.Token, "token c": c.Token,
		"revoked token": revoked.Token, "CA key": keyBody(caKey), "CA certificate": keyBody(s.ca.CertPEM)} {
		if strings.Contains(log, secret) {
			t.Errorf("%s appears in the logs", name)
		}
		if strings.Contains(string(grants), secret) {
			t.Errorf("%s appears in %s", name, stateName)
		}
	}
	for _, h := range []string{"Authorization", "Bearer", "Basic "} {
		if strings.Contains(log, h) {
			t.Errorf("logs mention %q", h)
		}
	}
}

// keyBody is the base64 body of a PEM block, the part that would leak.
func keyBody(pemData []byte) string {
	lines := strings.Split(strings.TrimSpace(string(pemData)), "\n")
	return strings.Join(lines[1:len(lines)-1], "")[:40]
}

// TestServiceSurvivesRestart: a new Service on the same data dir keeps the
// CA, the port and the grants, so running containers keep their access.
func TestServiceSurvivesRestart(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	dir := filepath.Join(t.TempDir(), "data")
	s1, _ := newService(t, Options{DataDir: dir})
	if err := s1.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s1.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-r", Container: "aimi-r", Branch: "feat-r"}, "")
	if err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(g.CAFile)
	s1.Close()

	// No ListenOn: the new service listens where the old one did, on the
	// same port, before the orchestrator gets round to it.
	s2, _ := newService(t, Options{DataDir: dir})
	caAfter, _ := os.ReadFile(s2.CAFile())
	if string(caBefore) != string(caAfter) {
		t.Fatal("the CA changed across a restart")
	}
	if st, err := os.Stat(filepath.Join(dir, daemonca.KeyName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode: %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(s2.CAFile()); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("CA cert mode: %v %v", st.Mode(), err)
	}
	if out, err := gitOut("", clientEnv(g.CAFile, bearer(g.Token)), "ls-remote", g.RepoURL); err != nil {
		t.Fatalf("the old URL and token after a restart: %v\n%s", err, out)
	}
	if err := s2.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatalf("ListenOn after the automatic one: %v", err)
	}
	g2, err := s2.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-r", Container: "aimi-r2", Branch: "feat-r2"}, "")
	if err != nil || !strings.HasPrefix(g2.RepoURL, strings.TrimSuffix(g.RepoURL, "swarm-r.git")) {
		t.Fatalf("grant after the restart: %+v, %v; want the same address as %s", g2, err, g.RepoURL)
	}
	// An address gone from the host is skipped, not fatal.
	s2.Close()
	data, _ := os.ReadFile(filepath.Join(dir, stateName))
	if err := os.WriteFile(filepath.Join(dir, stateName), []byte(strings.Replace(string(data), `"127.0.0.1"`, `"192.0.2.77"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s3, logs := newService(t, Options{DataDir: dir})
	if !strings.Contains(logs.String(), "not listening on a former address") {
		t.Fatalf("no note of the vanished address:\n%s", logs)
	}
	if _, err := s3.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-r", Container: "aimi-r3", Branch: "feat-r3"}, ""); !errors.Is(err, ErrNotListening) {
		t.Fatalf("Grant with no address = %v, want ErrNotListening", err)
	}
}

// TestListenOnCertificateNamesTheIP: the served certificate verifies
// against the CA for the IP itself.
func TestListenOnCertificateNamesTheIP(t *testing.T) {
	ctx := ctxT(t)
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM)
	port := s.Port("127.0.0.1")
	conn, err := tls.Dial("tcp", "127.0.0.1:"+itoa(port), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS with the service CA: %v", err)
	}
	conn.Close()
	if err := s.ListenOn(ctx, "not-an-ip"); err == nil {
		t.Fatal("ListenOn accepted a host name")
	}
}

func TestGrantRefusesBadInput(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, _ := newService(t, Options{})
	if _, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm", Container: "aimi-x", Branch: "b"}, ""); err == nil {
		t.Fatal("Grant before ListenOn succeeded")
	}
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "made", Container: "aimi-x", Branch: "b"}, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, repo, swarm, container, branch string }{
		{"swarm id with a slash", repo, "a/b", "aimi-x", "b"},
		{"swarm id with dots", repo, "..", "aimi-x", "b"},
		{"branch with a space", repo, "s", "aimi-x", "a b"},
		{"branch with ..", repo, "s", "aimi-x", "a..b"},
		{"relative repo", "repo", "s", "aimi-x", "b"},
		{"not a repository", t.TempDir(), "s", "aimi-x", "b"},
		{"empty container", repo, "s", "", "b"},
		{"swarm already made from another repository", newRepo(t), "made", "aimi-y", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Grant(ctx, contract.ContainerBranch{Repo: tc.repo, Swarm: tc.swarm, Container: tc.container, Branch: tc.branch}, ""); err == nil {
				t.Fatal("Grant succeeded")
			}
		})
	}
}

// TestPreReceiveHookIsASecondGate: receive-pack run without the service's
// gate (plain local push into the mirror) is refused by the hook.
func TestPreReceiveHookIsASecondGate(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-h", Container: "aimi-h", Branch: "feat-h"}, ""); err != nil {
		t.Fatal(err)
	}
	mirror := s.mirrorPath("swarm-h")
	before := snapshot(t, mirror)
	for _, tc := range []struct {
		name string
		env  []string
		ref  string
	}{
		{"no allowed ref refuses everything", nil, "refs/heads/feat-h"},
		{"another ref than the allowed one", []string{EnvAllowedRef + "=refs/heads/feat-h"}, "refs/heads/main2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitOut(repo, tc.env, "push", mirror, "HEAD:"+tc.ref)
			if err == nil || !strings.Contains(out, "aimi: push to "+tc.ref+" refused") {
				t.Fatalf("push = %v\n%s", err, out)
			}
		})
	}
	if after := snapshot(t, mirror); after != before {
		t.Fatal("mirror changed")
	}
}

// A later Grant for the same swarm (an appended task file) brings the
// user's new commits into the mirror, fast-forwards only: a branch a
// container pushed is not moved back by the user's older one.
func TestGrantRefreshesTheMirror(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-f", Container: "aimi-f1", Branch: "feat-f1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	mirror := s.mirrorPath("swarm-f")
	// The user makes feat-f1 too (at main), then the container pushes its
	// own feat-f1 ahead of it.
	mustGit(t, repo, "branch", "feat-f1")
	work := filepath.Join(t.TempDir(), "w")
	env := clientEnv(g.CAFile, bearer(g.Token))
	if out, err := gitOut("", env, "clone", "-q", g.RepoURL, work); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	mustGit(t, work, "checkout", "-q", "-b", "feat-f1")
	pushed := commitFile(t, work, "f1.txt", "f1\n")
	if out, err := gitOut(work, env, "push", "-q", "origin", "HEAD:refs/heads/feat-f1"); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	// Meanwhile the user commits a new task file on main.
	newMain := commitFile(t, repo, "later-tasks.json", "{}\n")

	if _, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-f", Container: "aimi-f2", Branch: "feat-f2"}, ""); err != nil {
		t.Fatal(err)
	}
	if got := mustGit(t, mirror, "rev-parse", "refs/heads/main"); got != newMain {
		t.Errorf("mirror main = %s, want the user's new %s", got, newMain)
	}
	if got := mustGit(t, mirror, "rev-parse", "refs/heads/feat-f1"); got != pushed {
		t.Errorf("mirror feat-f1 = %s, want the container's %s (not the user's older one)", got, pushed)
	}
}

// TestForgetDropsTheSwarmsMirrorAndGrantsOnly: after Forget the swarm's
// mirror is gone from the data dir, its tokens no longer open anything, a
// restart does not bring its records back, and another swarm (including a
// container name it reused) is untouched.
func TestForgetDropsTheSwarmsMirrorAndGrantsOnly(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	dir := filepath.Join(t.TempDir(), "data")
	s, _ := newService(t, Options{DataDir: dir})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	old, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-old", Container: "aimi-a", Branch: "feat-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	oldOnly, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-old", Container: "aimi-b", Branch: "feat-b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// A later swarm reuses the container name aimi-a.
	kept, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-new", Container: "aimi-a", Branch: "feat-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "swarm-old"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := os.Stat(s.mirrorPath("swarm-old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mirror of the forgotten swarm still there (stat: %v)", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(s.mirrorPath("x")), ".forget-*"))
	if len(left) != 0 {
		t.Errorf("forget left %v behind", left)
	}
	if out, err := gitOut("", clientEnv(oldOnly.CAFile, bearer(oldOnly.Token)), "ls-remote", oldOnly.RepoURL); err == nil {
		t.Errorf("a forgotten swarm's token still lists refs:\n%s", out)
	}
	if _, err := gitOut("", clientEnv(old.CAFile, bearer(old.Token)), "ls-remote", old.RepoURL); err == nil {
		t.Error("the replaced token of a reused name opens something")
	}
	if out, err := gitOut("", clientEnv(kept.CAFile, bearer(kept.Token)), "ls-remote", kept.RepoURL); err != nil {
		t.Fatalf("the other swarm lost access: %v\n%s", err, out)
	}
	if err := s.Forget(ctx, "swarm-old"); err != nil {
		t.Errorf("forgetting twice: %v, want nil", err)
	}
	if err := s.Forget(ctx, "../etc"); err == nil {
		t.Error("Forget accepted a swarm id that is not a repository name")
	}
	s.Close()

	s2, _ := newService(t, Options{DataDir: dir})
	if _, ok := s2.recordByName(contract.Sandbox{Swarm: "swarm-old", Container: "aimi-b"}); ok {
		t.Error("a forgotten container's record came back after a restart")
	}
	if rec, ok := s2.recordByName(contract.Sandbox{Swarm: "swarm-new", Container: "aimi-a"}); !ok || rec.SwarmKey != "swarm-new" {
		t.Errorf("record of the reused name after a restart: %+v %v, want swarm-new's", rec, ok)
	}
}

// TestGrantsArePerSwarm: two repositories' swarms grant and revoke a
// container of the same name at the same moment (a start that fails on the
// name and rolls back); each swarm's token keeps working whatever the other
// does, round after round.
func TestGrantsArePerSwarm(t *testing.T) {
	ctx := ctxT(t)
	repoA, repoB := newRepo(t), newRepo(t)
	s, _ := newService(t, Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		swarmA, swarmB := "swarm-a-"+itoa(round), "swarm-b-"+itoa(round)
		var a Grant
		var errA, errB error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			a, errA = s.Grant(ctx, contract.ContainerBranch{Repo: repoA, Swarm: swarmA, Container: "aimi-same", Branch: "feat-same"}, "")
		}()
		go func() {
			defer wg.Done()
			// The other start grants, fails on the name, rolls back.
			_, errB = s.Grant(ctx, contract.ContainerBranch{Repo: repoB, Swarm: swarmB, Container: "aimi-same", Branch: "feat-same"}, "")
			s.Revoke(contract.Sandbox{Swarm: swarmB, Container: "aimi-same"})
		}()
		wg.Wait()
		if errA != nil || errB != nil {
			t.Fatalf("round %d: grants: %v / %v", round, errA, errB)
		}
		if out, err := gitOut("", clientEnv(a.CAFile, bearer(a.Token)), "ls-remote", a.RepoURL); err != nil {
			t.Fatalf("round %d: another swarm's grant and revoke of the same name took this swarm's access: %v\n%s", round, err, out)
		}
	}
}

// TestGrantAgainKeepsTheEarlierToken: a daemon killed after handing a
// container its token but before noting it grants again after its restart;
// the container's runner holds the first token, which must still work (also
// after a further restart), and a revoke ends both.
func TestGrantAgainKeepsTheEarlierToken(t *testing.T) {
	ctx := ctxT(t)
	repo := newRepo(t)
	dir := filepath.Join(t.TempDir(), "data")
	s1, _ := newService(t, Options{DataDir: dir})
	if err := s1.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	first, err := s1.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-e", Container: "aimi-e", Branch: "feat-e"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2, _ := newService(t, Options{DataDir: dir})
	again, err := s2.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-e", Container: "aimi-e", Branch: "feat-e"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s, _ := newService(t, Options{DataDir: dir})
	for name, g := range map[string]Grant{"first": first, "again": again} {
		if out, err := gitOut("", clientEnv(g.CAFile, bearer(g.Token)), "ls-remote", g.RepoURL); err != nil {
			t.Fatalf("the %s token after a grant again and a restart: %v\n%s", name, err, out)
		}
	}
	third, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-e", Container: "aimi-e", Branch: "feat-e"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitOut("", clientEnv(first.CAFile, bearer(first.Token)), "ls-remote", first.RepoURL); err == nil {
		t.Fatal("a token two grants back still works")
	}
	s.Revoke(contract.Sandbox{Swarm: "swarm-e", Container: "aimi-e"})
	for name, g := range map[string]Grant{"again": again, "third": third} {
		if _, err := gitOut("", clientEnv(g.CAFile, bearer(g.Token)), "ls-remote", g.RepoURL); err == nil {
			t.Fatalf("the %s token works after the revoke", name)
		}
	}
}
