package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/nstest"
)

// TestSandboxReachesAPrivateHostTheUserNamed: a company's git server or
// package mirror on its LAN (a test host in a network namespace on 10.x,
// serving HTTP) is named in the daemon's egress.allow, and the sandbox
// reaches it through the proxy. Names the user wrote too but that resolve
// to this machine's own address (its end of the namespace's pair), its
// loopback, a link-local address (the namespace's own) or a container on
// one of the engine's networks stay refused, and nothing of theirs
// arrives. The daemon resolves the names through an /etc/hosts of the
// test's own (its own mount namespace).
func TestSandboxReachesAPrivateHostTheUserNamed(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	lan := nstest.New(t)
	var lanHits atomic.Int64
	ln := lan.Listen(t, 0)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lanHits.Add(1)
		_, _ = io.WriteString(w, "company")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := nstest.Port(ln.Addr())
	var tcpHits, udpHits atomic.Int64
	hostPort, _ := hostListeners(t, &tcpHits, &udpHits)
	other := otherNetworkContainer(t, ctx, image)

	hosts := map[string]string{"git.corp.test": lan.Addr.String(), "meta.corp.test": lan.LinkLocal.String(),
		"peer.corp.test": lan.Peer.String(), "loop.corp.test": "127.0.0.1", "ctr.corp.test": other}
	ports := map[string]int{"git.corp.test": port, "meta.corp.test": port, "peer.corp.test": hostPort, "loop.corp.test": hostPort, "ctr.corp.test": 8080}
	var allow, targets []string
	for name := range hosts {
		hp := fmt.Sprintf("%s:%d", name, ports[name])
		allow = append(allow, "    - \""+hp+"\"\n")
		targets = append(targets, "proxy http://"+hp+"/")
	}
	repo := egressRepo(t, targets)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  kind: exec\n  command: HOSTPORT=1 perl probe.pl\ngit:\n  mode: local\negress:\n  allow:\n" + strings.Join(allow, "")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    cleanEnv(),
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
			"AIMI_SWARM_STOP_GRACE=2s",
		},
		Wrap: withHostsFile(t, hosts),
	})
	defer p.stop(t)
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitBranch(t, repo, "feat/probe", 5*time.Minute)
	out := gittest.Git(t, repo, "show", "feat/probe:probe-out.txt")
	t.Logf("probe:\n%s", out)
	for name := range hosts {
		want := "403"
		if name == "git.corp.test" {
			want = "200"
		}
		if !proxied(out, fmt.Sprintf("http://%s:%d/", name, ports[name]), want) {
			t.Errorf("%s (%s) through the proxy: want %s", name, hosts[name], want)
		}
	}
	if n := lanHits.Load(); n != 1 {
		t.Errorf("the namespace's server answered %d requests, want 1 (git.corp.test)", n)
	}
	if n := tcpHits.Load(); n != 0 {
		t.Errorf("this machine's service got %d connections through the proxy", n)
	}
}

// proxied reports whether the probe's out says the proxy answered url
// with status.
func proxied(out, url, status string) bool {
	return strings.Contains(out, "proxy "+url+" -> HTTP/1.0 "+status) || strings.Contains(out, "proxy "+url+" -> HTTP/1.1 "+status)
}

// withHostsFile runs the daemon in a mount namespace of its own whose
// /etc/hosts names hosts (name -> address): the names the test owns
// resolve for that daemon only, and no resolver is asked.
func withHostsFile(t *testing.T, hosts map[string]string) func(*exec.Cmd) {
	t.Helper()
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for name, addr := range hosts {
		fmt.Fprintf(&b, "%s\t%s\n", addr, name)
	}
	file := filepath.Join(shortDir(t), "hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("util-linux's unshare is not installed: %v", err)
	}
	return func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"unshare", "--mount", "--", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, file, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = unshare
	}
}
