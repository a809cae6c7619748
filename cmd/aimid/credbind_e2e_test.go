package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// releasedAgent waits until /tmp/release exists in its container, then
// does its story: a test ends one container while the other runs on.
const releasedAgent = `while [ ! -e /tmp/release ]; do sleep 1; done; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`

// gitAs runs git ls-remote in container id with token against url (the
// container's own loopback forward) and returns its output and exit.
const gitAs = `git -c http.extraHeader="Authorization: Bearer $T" ls-remote "$U" 2>&1; echo "exit=$?"`

// proxyAs asks the egress proxy on the container's loopback for a host no
// rule allows, claiming in its headers to be another container.
const proxyAs = `use IO::Socket::INET; my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => 3128, Timeout => 5) or die "no proxy: $@";
print $c "GET http://$ENV{H}/ HTTP/1.0\r\nHost: $ENV{H}\r\nProxy-Authorization: Bearer $ENV{T}\r\nX-Aimi-Container: $ENV{N}\r\n\r\n"; my $s = <$c>; print $s;`

// TestCredentialsAreBoundToTheirContainersSocket: two sandboxes of one
// swarm on one engine, each reaching the daemon through sockets of its
// own. One's git token presented through the other's git socket is
// refused (and logged without the token); after its container ended it is
// revoked. The egress proxy journals a request on the socket's container,
// whatever the request's headers claim.
func TestCredentialsAreBoundToTheirContainersSocket(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo := gitRepo(t, 1, "one", "two")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	env := localEnv()
	config := "agent:\n  kind: exec\n  command: '" + releasedAgent + "'\ngit:\n  mode: local\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   config,
		LogLevel: "debug",
		Base:     env,
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
			"AIMI_SWARM_STOP_GRACE=2s",
		},
	})
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	// Running, not only created: the checks below exec in them.
	v := waitFor(t, sock, repo, 3*time.Minute, "both containers running", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 2 && v.State.Containers[0].Status == state.StatusRunning && v.State.Containers[1].Status == state.StatusRunning
	})
	one, two := v.State.ContainerForTask(taskPath("one")), v.State.ContainerForTask(taskPath("two"))
	if one == nil || two == nil {
		t.Fatalf("containers by task file: %+v", v.State.Containers)
	}
	cli := dockertest.Client(t)
	e1, e2 := containerEnv(t, ctx, cli, one.ContainerID), containerEnv(t, ctx, cli, two.ContainerID)
	tok1, tok2 := e1[contract.EnvGitToken], e2[contract.EnvGitToken]
	info, err := cli.ContainerInspect(ctx, two.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	url := info.Config.Labels[contract.LabelRepoURL]
	if tok1 == "" || tok2 == "" || tok1 == tok2 || url == "" {
		t.Fatalf("the sandboxes do not hold git tokens of their own (url %q)", url)
	}
	git := func(id, tok string) string {
		return execIn(t, ctx, cli, id, "env", "T="+tok, "U="+url, "sh", "-c", gitAs)
	}
	// Wait for two's forward: its own token works through its own socket.
	testwait.Eventually(t, time.Minute, "two's own token to work through its own socket", func() error {
		if out := git(two.ContainerID, tok2); !strings.HasSuffix(out, "exit=0") {
			return errors.New(out)
		}
		return nil
	}, testwait.Every(time.Second))
	if out := git(two.ContainerID, tok1); strings.HasSuffix(out, "exit=0") {
		t.Errorf("one's git token through two's socket was accepted:\n%s", out)
	}
	checkProxyAttribution(t, ctx, run, two.ContainerID, one, two, tok1)

	execIn(t, ctx, cli, one.ContainerID, "touch", "/tmp/release")
	waitFor(t, sock, repo, 3*time.Minute, "one finished", func(v api.SwarmView) bool {
		c := v.State.ContainerForTask(taskPath("one"))
		return c != nil && c.Status.Terminal()
	})
	// Its container ended: its token is revoked (the record stays, the
	// token's hash goes).
	waitTokenRevoked(t, filepath.Join(dir, "data"), tok1)
	if out := git(two.ContainerID, tok1); strings.HasSuffix(out, "exit=0") {
		t.Errorf("the ended container's git token was accepted:\n%s", out)
	}
	execIn(t, ctx, cli, two.ContainerID, "touch", "/tmp/release")
	waitFor(t, sock, repo, 3*time.Minute, "all finished", allExited)
	p.stop(t)
	checkRefusalLoggedWithoutTokens(t, p.logs(), tok1, tok2)
}

// checkRefusalLoggedWithoutTokens checks the daemon's log logs tells of
// the refused token, so that an operator sees the attempt, and holds none
// of the git tokens toks, which would let a reader of the log use them.
func checkRefusalLoggedWithoutTokens(t *testing.T, logs string, toks ...string) {
	t.Helper()
	if !strings.Contains(logs, "git token used from outside its container refused") {
		t.Error("the refusal is not in the daemon's log")
	}
	for _, s := range toks {
		if strings.Contains(logs, s) {
			t.Error("the daemon's log holds a git token")
		}
	}
}

// waitTokenRevoked waits up to a minute for the git service's grants in
// dataDir to lose the hash of tok.
func waitTokenRevoked(t *testing.T, dataDir, tok string) {
	t.Helper()
	sum := sha256.Sum256([]byte(tok))
	testwait.Eventually(t, time.Minute, "the ended container's git token revoked", func() error {
		grants, err := os.ReadFile(filepath.Join(dataDir, "git", "grants.json"))
		if err == nil && strings.Contains(string(grants), hex.EncodeToString(sum[:])) {
			err = errors.New("still granted")
		}
		return err
	}, testwait.Every(200*time.Millisecond))
}

// checkProxyAttribution asks the proxy, from container id (two's), for a
// refused host with headers naming one, and checks that the refusal is
// journaled on two and not on one.
func checkProxyAttribution(t *testing.T, ctx context.Context, run func(...string) (int, string, string), id string, one, two *state.Container, tok1 string) {
	t.Helper()
	host := "claims-" + one.ContainerName + ".example"
	cli := dockertest.Client(t)
	if got := execIn(t, ctx, cli, id, "env", "H="+host, "T="+tok1, "N="+one.ContainerName, "perl", "-e", proxyAs); !strings.Contains(got, " 403") {
		t.Errorf("the proxy answered %q, want 403", got)
	}
	testwait.Eventually(t, 30*time.Second, "the refusal journaled on the container whose socket it came through", func() error {
		if _, logs2, _ := run("swarm", "logs", two.ContainerName); !strings.Contains(logs2, host) {
			return fmt.Errorf("its journal:\n%s", logs2)
		}
		return nil
	}, testwait.Every(500*time.Millisecond))
	if _, logs1, _ := run("swarm", "logs", one.ContainerName); strings.Contains(logs1, host) {
		t.Errorf("the refusal is journaled on the container the headers named:\n%s", logs1)
	}
}
