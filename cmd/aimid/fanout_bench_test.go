package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// fanOutMemory is the memory limit both sides of BenchmarkFanOutUser give
// each container: the isolation a swarm's containers get includes one.
const fanOutMemory = 512 << 20

// BenchmarkFanOutUser measures fan-out as the user sees it: from `aimi swarm
// start --all --local --max N` (the CLI, through the real daemon) until
// `aimi swarm status --watch --json` shows N containers running, next to
// the physical limit measured in the same run: a new bridge network with
// inter-container traffic off, then N concurrent ContainerCreate +
// ContainerStart of the same sandbox image on it with the raw Docker
// client, with the same memory limit. Rounds alternate raw and user so
// that a change in machine load hits both; the reported ratio (target <=
// 1.15) is user / raw over all rounds.
//
//	go test -run '^$' -bench FanOutUser -benchtime=2x ./cmd/aimid
func BenchmarkFanOutUser(b *testing.B) {
	image := sandboxImage(b)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	for _, n := range []int{16, 32} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var user, raw time.Duration
			for i := 0; i < b.N; i++ {
				raw += rawFanOutDocker(b, cli, image, run, n, i)
				user += userFanOut(b, image, n)
			}
			b.ReportMetric(user.Seconds()/float64(b.N), "s-user")
			b.ReportMetric(raw.Seconds()/float64(b.N), "s-raw")
			b.ReportMetric(float64(user)/float64(raw), "ratio")
		})
	}
}

// rawFanOutDocker is the engine's pace: a new icc-off bridge network, then
// n containers created and started at once on it by the Docker client
// alone, with a memory limit. The containers are removed afterwards,
// untimed.
func rawFanOutDocker(b *testing.B, cli *client.Client, image, run string, n, round int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	labels := map[string]string{dockertest.LabelKey: run}
	netName := fmt.Sprintf("aimi-benchraw-%s-%d-%d", run[:8], n, round)
	// The network is part of the work: a swarm's start makes its own
	// icc-off bridge too.
	start := time.Now()
	nw, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{
		Driver: "bridge", Labels: labels,
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
	})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created, err := cli.ContainerCreate(ctx,
				&container.Config{Image: image, Labels: labels, OpenStdin: true, AttachStdin: true},
				&container.HostConfig{NetworkMode: container.NetworkMode(netName),
					Resources: container.Resources{Memory: fanOutMemory, MemorySwap: fanOutMemory}},
				nil, nil, fmt.Sprintf("%s-r%d-%d", netName, round, i))
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = created.ID
			errs[i] = cli.ContainerStart(ctx, created.ID, container.StartOptions{})
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			b.Fatalf("raw container %d: %v", i, err)
		}
	}
	for _, id := range ids {
		cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	}
	cli.NetworkRemove(ctx, nw.ID)
	return took
}

// userFanOut starts a daemon in local git mode on a repository with n
// one-story task files and times `aimi swarm start` until `aimi swarm
// status --watch --json` shows every container running. Stopping, cleanup
// and the daemon's exit are untimed.
func userFanOut(b *testing.B, image string, n int) time.Duration {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fan%02d", i)
	}
	repo := localRepo(b, names...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sock, p, start := startLocalSwarm(b, ctx, image, repo, n)
	defer p.stop(b)
	waitStatus(b, ctx, repo, sock, "running", startedIn, n)
	took := time.Since(start)
	aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock)
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return took
}

// startedIn counts the containers past pending (running, or already
// finished: a one-story demo run can end between two polls) in the state
// file printed by `aimi swarm status --json`.
func startedIn(stateJSON string) int {
	var sw struct {
		Containers []struct {
			Status string `json:"status"`
		} `json:"containers"`
	}
	if json.Unmarshal([]byte(stateJSON), &sw) != nil {
		return 0
	}
	n := 0
	for _, c := range sw.Containers {
		if c.Status != "pending" {
			n++
		}
	}
	return n
}

// localRepo is a checkout with no origin holding one committed one-story
// task file per name on main, as local git mode expects.
func localRepo(b *testing.B, names ...string) string {
	b.Helper()
	repo := shortDir(b)
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 1), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "task files"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	removeProjectContainersAtEnd(b, repo)
	return repo
}

// startLocalSwarm launches a daemon in local git mode on the demo agent and
// runs `aimi swarm start --all --local --max n` on repo; it returns the
// daemon's socket, the daemon, and when the start was asked for.
func startLocalSwarm(b *testing.B, ctx context.Context, image, repo string, n int, extraEnv ...string) (string, *proc, time.Time) {
	b.Helper()
	dir := shortDir(b)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Env:     append([]string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m", "AIMI_SWARM_STOP_GRACE=1s"}, extraEnv...),
	})
	start := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--max", strconv.Itoa(n), "--repo", repo, "--socket", sock); code != 0 {
		p.stop(b)
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	return sock, p, start
}

// waitStatus follows `aimi swarm status --watch --json` (one document per
// change, as a script watching the swarm would) until count finds n
// containers in a printed state. Watching instead of polling keeps the
// measuring itself off the machine the fan-out competes for, and sees
// the change when it happens.
func waitStatus(b *testing.B, ctx context.Context, repo, sock, what string, count func(string) int, n int) {
	b.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		code := cli.Run(wctx, []string{"swarm", "status", "--watch", "--json", "--interval", "1s", "--repo", repo, "--socket", sock},
			cli.Streams{In: strings.NewReader(""), Out: pw, Err: &errOut})
		pw.Close()
		exited <- code
	}()
	dec := json.NewDecoder(pr)
	last := ""
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			cancel()
			go io.Copy(io.Discard, pr)
			code := <-exited
			b.Fatalf("not all %d %s (watch ended: %v, exit %d): %s %s", n, what, err, code, last, errOut.String())
		}
		last = string(doc)
		if count(last) == n {
			cancel()
			go io.Copy(io.Discard, pr)
			<-exited
			return
		}
	}
}
