package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// httpsOrigin is a git server over HTTPS for remote-mode tests: a bare
// repository served by git http-backend on an address of this machine the
// containers reach (the docker0 bridge's), with a certificate of a CA made
// for the test. caFile is that CA (PEM), for git.origin_ca and the
// checkout's http.sslCAInfo.
type httpsOrigin struct {
	url, bare, caFile string
}

// startHTTPSOrigin serves a new bare repository named name.git; pushes are
// open to anyone (the server is the test's).
func startHTTPSOrigin(t testing.TB, name string) httpsOrigin {
	t.Helper()
	return startHTTPSOriginWith(t, name, nil)
}

// startHTTPSOriginWith is startHTTPSOrigin whose server also serves api
// under /api/v3/ (GitHub Enterprise's API base on the repositories' host),
// when api is not nil.
func startHTTPSOriginWith(t testing.TB, name string, api http.Handler) httpsOrigin {
	t.Helper()
	ip := hostIPForContainers(t)
	root := shortDir(t)
	bare := filepath.Join(root, name+".git")
	gitOut(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitOut(t, bare, "config", "http.receivepack", "true")
	caPEM, cert := testCA(t, ip)
	caFile := filepath.Join(root, "origin-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	if api != nil {
		mux := http.NewServeMux()
		mux.Handle("/api/v3/", http.StripPrefix("/api/v3", api))
		mux.Handle("/", h)
		h = mux
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: time.Minute}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return httpsOrigin{url: "https://" + ln.Addr().String() + "/" + name + ".git", bare: bare, caFile: caFile}
}

// refuse makes the origin refuse every push with a pre-receive hook, as a
// protected branch would.
func (o httpsOrigin) refuse(t testing.TB) {
	t.Helper()
	hook := filepath.Join(o.bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'protected branch: push refused' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// hostIPForContainers is the docker0 bridge's address: every container
// network reaches this machine there.
func hostIPForContainers(t testing.TB) net.IP {
	t.Helper()
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("no docker0 bridge to serve origin on: %v", err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return nil
}

// testCA makes a CA and a server certificate for ip signed by it.
func testCA(t testing.TB, ip net.IP) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aimi test origin CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{ip}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestRemoteModeRefusedPushIsKeptThenTakenAsAKeepRef: the real daemon in
// remote git mode, origin an HTTPS server with its own CA (git.origin_ca
// for the containers, http.sslCAInfo for the checkout), the real runner and
// an exec agent. Origin refuses the container's push, so it ends failed
// with GIT_PUSH_FAILED; cleanup without --force keeps it (origin lacks its
// tip); resume --retry-failed is refused (origin still refuses) and leaves
// the commits in the checkout at refs/aimi/kept/<swarm>/<container>.
func TestRemoteModeRefusedPushIsKeptThenTakenAsAKeepRef(t *testing.T) {
	parallel(t)
	image := sandboxImage(t)
	name := "refused-" + dockertest.RunID()[:6]
	origin := startHTTPSOrigin(t, name)
	repo := historyRepo(t, 0, 0, name)
	gitOut(t, repo, "remote", "add", "origin", origin.url)
	gitOut(t, repo, "config", "http.sslCAInfo", origin.caFile)
	// GIT_SSL_CAINFO, when the environment has one, wins over
	// http.sslCAInfo: the test's git and the daemon get origin's CA there.
	caEnv := "GIT_SSL_CAINFO=" + origin.caFile
	for _, args := range [][]string{{"push", "-q", "origin", "main"}, {"fetch", "-q", "origin"}} {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), caEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	origin.refuse(t)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env: []string{
			"AIMI_GIT_MODE=remote", "AIMI_GIT_ORIGIN_CA=" + origin.caFile, caEnv, "AIMI_AGENT_KIND=exec",
			`AIMI_AGENT_COMMAND=echo done > "$AIMI_STORY_ID.txt"`,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := func(args ...string) (int, string, string) {
		code, out, errOut := aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
		t.Logf("aimi %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		return code, out, errOut
	}
	if code, _, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 5*time.Minute, "the container ended", func(v api.SwarmView) bool {
		return len(v.Containers) == 1 && allExited(v)
	})
	d := v.Containers[0]
	errs, _ := json.Marshal(d.Errors)
	if d.Status != "failed" || !strings.Contains(string(errs), "GIT_PUSH_FAILED") {
		t.Fatalf("%s ended %s with errors %s; want failed with GIT_PUSH_FAILED (origin refused)\ndaemon log:\n%s", d.Name, d.Status, errs, tail(p.stderr.String(), 4000))
	}
	if code, out, _ := run("swarm", "cleanup"); code != 0 || !strings.Contains(out, "kept "+d.Name+":") {
		t.Fatalf("cleanup: exit %d; want %s kept (origin lacks its commits)", code, d.Name)
	}
	if code, _, errOut := run("swarm", "resume", "--retry-failed"); code == 0 || !strings.Contains(errOut, d.Name) {
		t.Errorf("resume --retry-failed: exit %d; want it refused naming %s while origin refuses", code, d.Name)
	}
	ref := contract.KeptRef(contract.Sandbox{Swarm: v.State.SwarmID, Container: d.Name})
	tip := gitOut(t, repo, "rev-parse", "--verify", ref)
	if files := gitOut(t, repo, "ls-tree", "--name-only", ref); !strings.Contains(files, "US-001.txt") {
		t.Errorf("keep ref %s (%s) holds %q, want the story's file", ref, tip, files)
	}
	if out, _ := exec.Command("git", "-C", origin.bare, "rev-parse", "--verify", "refs/heads/feat/"+name).CombinedOutput(); !strings.Contains(string(out), "fatal") && strings.TrimSpace(string(out)) != "" {
		t.Errorf("origin has the branch although it refuses pushes: %s", out)
	}
	if code, _, _ := run("swarm", "cleanup", "--force"); code != 0 {
		t.Errorf("cleanup --force: exit %d", code)
	}
	// The socket directory stayed while the stopped container did (the
	// keep ref above was read through it) and goes with the container.
	if left, _ := os.ReadDir(filepath.Join(dir, "data", "net")); len(left) > 0 {
		t.Errorf("socket directories left after the container was removed: %d", len(left))
	}
}
