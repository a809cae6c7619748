package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// gvisorContainers is how many one-story task files a BenchmarkGVisor
// round starts.
const gvisorContainers = 6

// BenchmarkGVisor measures what gVisor costs a swarm: on one engine of the
// test's own with Debian's runsc registered (as in
// TestGVisorRuntimeRunsTheDemoSwarm), `aimi swarm start --all --local
// --max 6` of six one-story task files on the demo agent, once with
// sandbox.runtime runc and once with runsc, alternated in each round. Per
// runtime: the fan-out (start until `aimi swarm status --watch --json`
// shows every container started) and the time to the first story (start
// until every container wrote its first in_progress progress-update, after
// its clone through the sockets and the agent's start); and runsc's ratio
// to runc for each. The engine is nested (inside a container, on the
// storage driver it picks there): the figures are its own, the ratios
// what to expect of gVisor.
//
//	go test -run '^$' -bench GVisor -benchtime 1x ./cmd/aimid
func BenchmarkGVisor(b *testing.B) {
	image := sandboxImage(b)
	dir := shortDir(b)
	c := gvisorEngine(b, image, dir)
	fan := map[string]time.Duration{}
	first := map[string]time.Duration{}
	runtimes := []string{"runc", "runsc"}
	for i := 0; i < b.N; i++ {
		for _, rt := range runtimes {
			f, w := gvisorRound(b, c, image, dir, rt)
			fan[rt] += f
			first[rt] += w
		}
		runtimes[0], runtimes[1] = runtimes[1], runtimes[0]
	}
	for _, rt := range runtimes {
		b.ReportMetric(fan[rt].Seconds()/float64(b.N), "s-fanout-"+rt)
		b.ReportMetric(first[rt].Seconds()/float64(b.N), "s-first-story-"+rt)
	}
	b.ReportMetric(float64(fan["runsc"])/float64(fan["runc"]), "fanout-ratio")
	b.ReportMetric(float64(first["runsc"])/float64(first["runc"]), "first-story-ratio")
}

// gvisorRound starts a daemon on engine c with sandbox.runtime rt and a
// swarm of gvisorContainers one-story task files, and returns how long
// until every container started and until every one began its first
// story, both from `aimi swarm start`. The daemon's directories are under
// dir, which the engine binds at the same path.
func gvisorRound(b *testing.B, c *clustertest.Cluster, image, dir, rt string) (fanOut, firstStory time.Duration) {
	b.Helper()
	names := make([]string, gvisorContainers)
	sfx := dockertest.RunID()[:4]
	for i := range names {
		names[i] = fmt.Sprintf("gv%02d-%s", i, sfx)
	}
	repo := localRepo(b, names...)
	own, err := os.MkdirTemp(dir, rt)
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(own, "aimid.sock")
	p := launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(own, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Base:    cleanEnv(),
		Env:     gvisorSettings(c, image, rt),
	})
	defer p.stop(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--max", strconv.Itoa(gvisorContainers), "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("start under %s: exit %d %s", rt, code, errOut)
	}
	waitStatus(b, ctx, repo, sock, "running", startedIn, gvisorContainers)
	fanOut = time.Since(start)
	waitStatus(b, ctx, repo, sock, "done", terminalIn, gvisorContainers)
	at := firstWork(b, repo, validState(b, repo))
	if len(at) != gvisorContainers {
		b.Fatalf("under %s %d of %d containers wrote an in_progress update; daemon log:\n%s", rt, len(at), gvisorContainers, p.logs())
	}
	for _, t := range at {
		firstStory = max(firstStory, t.Sub(start))
	}
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return fanOut, firstStory
}
