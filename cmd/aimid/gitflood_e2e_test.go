package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// holdMarker in a story's description makes the exec agent of the git
// bounds tests sleep instead of working: its container keeps the swarm
// (and so its network and the git service's listener) active.
const holdMarker = "HOLD-THE-SWARM"

// boundsAgent is the exec agent of these tests: a story whose prompt holds
// holdMarker sleeps; any other writes $AIMI_STORY_ID.txt (with
// $BOUNDS_BYTES random bytes more when set for that story).
const boundsAgent = `AIMI_AGENT_COMMAND=if grep -q ` + holdMarker + `; then sleep 600; fi; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`

// holdTaskFile is a one-story task file whose story holds the swarm.
func holdTaskFile(branch string) []byte {
	return bytes.Replace(taskFileJSON(branch, 1), []byte("As a developer, I want step 1"), []byte(holdMarker+": as a developer, I want step 1"), 1)
}

// floodScript opens $N connections to the git service at $GW:$PORT from
// inside a container (the sandbox image has perl, not bash) and holds them,
// saying how many it opened.
const floodScript = `
use IO::Socket::INET;
$| = 1;
my @held;
while (@held < $ENV{N}) {
	my $c = IO::Socket::INET->new(PeerAddr => $ENV{GW}, PeerPort => $ENV{PORT}, Timeout => 5) or last;
	push @held, $c;
	print "opened " . scalar(@held) . "\n" if @held % 500 == 0;
}
print "flood holds " . scalar(@held) . "\n";
sleep 600;
`

// TestGitServiceFloodFromOneContainerSlowsOnlyItself: the real daemon in
// local git mode under a 1024 file limit, a swarm holding a container, and
// a container on the swarm's network opening 3,000 connections to the git
// service and keeping them. While the flood holds them, every `aimi swarm
// status` answers within 5 s and a container appended to the swarm clones,
// pushes and has its branch published: the flood used up its own share of
// connections, not the daemon's file descriptors.
//
// Not parallel: its 5 s bound is the claim, and the package's other tests
// running beside it would load the machine past it.
func TestGitServiceFloodFromOneContainerSlowsOnlyItself(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux) runs the daemon with a small file limit: %v", err)
	}
	image := sandboxImage(t)
	sfx := dockertest.RunID()[:6]
	hold, work := "hold-"+sfx, "work-"+sfx
	repo := historyRepo(t, 0, 0, work)
	writeCommitted(t, repo, hold, holdTaskFile("feat/"+hold))

	prlimit := func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"prlimit", "--nofile=1024:1024", "--"}, cmd.Args...)
		cmd.Path, _ = exec.LookPath("prlimit")
	}
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: dataDir,
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=exec", boundsAgent},
		Wrap:    prlimit,
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--file", hold+"-tasks.json", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "the holding container works on its story", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].StoryProgress.InProgress == 1
	})
	cli := dockertest.Client(t)
	// The sandbox has no network: its way to the git service is its own
	// socket, which the runner serves on the loopback at the service's port.
	execFlood(t, ctx, cli, v.State.Containers[0].ContainerID, gitServicePort(t, dataDir), 3000)

	if code, out, errOut := aimi(ctx, "swarm", "start", "--file", work+"-tasks.json", "--append", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("append while the flood holds its connections: exit %d\n%s\n%s\ndaemon log:\n%s", code, out, errOut, p.logs())
	}
	// Each round asks the daemon over a new connection of its socket (an
	// accept needs a file descriptor) and runs `aimi swarm status`.
	var slow []string
	calls := -1
	testwait.Eventually(t, 4*time.Minute, "the appended container to finish during the flood", func() error {
		calls++
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		c := daemon.NewClient(sock)
		sv, err := c.Status(cctx, repo)
		c.Close()
		code, _, errOut := aimi(cctx, "swarm", "status", "--repo", repo)
		ccancel()
		if took := time.Since(t0); err != nil || code != 0 || took > 5*time.Second {
			slow = append(slow, fmt.Sprintf("after %s: daemon %v, status exit %d %s", took.Round(time.Millisecond), err, code, strings.TrimSpace(errOut)))
		}
		if err == nil && calls >= 20 && workDone(sv, work) {
			return nil
		}
		return fmt.Errorf("%d status calls; failed or slow: %v\ndaemon log:\n%s", calls, slow, tail(p.logs(), 4000))
	}, testwait.Every(200*time.Millisecond))
	if len(slow) > 0 {
		t.Errorf("aimi swarm status failed or took over 5 s during the flood in %d calls: %v", len(slow), slow)
	}
	sw := validState(t, repo)
	for _, c := range sw.Containers {
		if c.ContainerName == "aimi-"+work && c.Status != state.StatusCompleted {
			t.Errorf("%s ended %s during the flood", c.ContainerName, c.Status)
		}
	}
	waitBranch(t, repo, "feat/"+work, 3*time.Minute)
}

// workDone: the container of task file name is terminal.
func workDone(v api.SwarmView, name string) bool {
	for _, c := range v.State.Containers {
		if c.ContainerName == "aimi-"+name && c.Status.Terminal() {
			return true
		}
	}
	return false
}

// writeCommitted writes .aimi/tasks/<name>-tasks.json and commits it.
func writeCommitted(t testing.TB, repo, name string, body []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task file "+name)
}

// gitServicePort is the git service's port, as it keeps it in its data
// dir.
func gitServicePort(t testing.TB, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "git", "grants.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Port int }
	if err := json.Unmarshal(b, &g); err != nil || g.Port == 0 {
		t.Fatalf("the git service's port in grants.json: %v %s", err, b)
	}
	return g.Port
}

// execFlood runs floodScript inside the sandbox id (as its user) against
// the git service's loopback port and waits until it holds its
// connections.
func execFlood(t testing.TB, ctx context.Context, cli *client.Client, id string, port, n int) {
	t.Helper()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd:          []string{"perl", "-e", floodScript},
		Env:          []string{"GW=127.0.0.1", "PORT=" + strconv.Itoa(port), "N=" + strconv.Itoa(n)},
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatalf("create the flood: %v", err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("start the flood: %v", err)
	}
	t.Cleanup(att.Close)
	held := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(att.Reader)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "flood holds"); i >= 0 {
				held <- sc.Text()[i:]
				return
			}
		}
		held <- ""
	}()
	select {
	case line := <-held:
		if line == "" {
			t.Fatal("the flood ended without holding its connections")
		}
		t.Logf("flood: %s", line)
	case <-time.After(2 * time.Minute):
		t.Fatal("the flood never said it holds its connections")
	}
}

// waitBranch waits until the checkout has branch (published).
func waitBranch(t testing.TB, repo, branch string, d time.Duration) {
	t.Helper()
	waitBranchesPublished(t, repo, []string{branch}, d, nil)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
