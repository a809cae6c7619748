package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

const (
	// idleWindow is how long the engine's requests are counted.
	idleWindow = 30 * time.Second
	// maxIdleRate is the most Engine API requests per second an idle
	// followed container may cost.
	maxIdleRate = 0.2
)

// TestIdleContainersCostTheEngineAlmostNothing: 20 containers that print
// nothing, followed by the real daemon through a proxy in front of the
// engine's socket that counts every Engine API request. Over 30 s they cost
// at most 0.2 requests per second each (the reader polled the engine's log
// and state several times a second per container). BenchmarkIdleEngineRate
// measures 100.
func TestIdleContainersCostTheEngineAlmostNothing(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("runs 20 containers for a minute")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("AIMI_IDLE_CONTAINERS")); err == nil && v > 0 {
		n = v
	}
	rate, ops := idleRate(t, n)
	t.Logf("%d idle containers: %.4f engine requests/s each over %s; requests: %s", n, rate, idleWindow, strings.Join(ops, ", "))
	if rate > maxIdleRate {
		t.Fatalf("an idle container costs %.3f engine requests/s, want <= %.1f (%s)", rate, maxIdleRate, strings.Join(ops, ", "))
	}
}

// BenchmarkIdleEngineRate reports the engine requests per second that one
// of 100 idle followed containers costs.
func BenchmarkIdleEngineRate(b *testing.B) {
	for b.Loop() {
		rate, ops := idleRate(b, 100)
		b.Logf("requests: %s", strings.Join(ops, ", "))
		b.ReportMetric(rate, "req/s/container")
	}
}

// idleRate starts n containers that print nothing through a daemon whose
// engine is a counting proxy, waits until all run and the start's own
// requests are over, and returns the requests per second per container over
// idleWindow, with what they were.
func idleRate(t testing.TB, n int) (float64, []string) {
	image := standinImage(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("idle%03d", i)
	}
	repo := gitRepo(t, 1, names...)
	dir := shortDir(t)
	proxy := dockertest.NewCountingProxy(t, dir)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  env:\n    STANDIN_SCRIPT: \"sleep|10m\"\n",
		Env: []string{
			"DOCKER_HOST=" + proxy.Host, "AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=32m",
			"AIMI_SANDBOX_SWAP=32m", "AIMI_SANDBOX_CPUS=0.2", "AIMI_SANDBOX_PIDS=16",
			"AIMI_SWARM_STOP_GRACE=1s", "AIMI_GIT_MODE=remote",
		},
	})
	defer p.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--max", strconv.Itoa(n), "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 8*time.Minute, "every container running", func(v api.SwarmView) bool {
		running := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning {
				running++
			}
		}
		return running == n
	})
	// The start's own requests (task-requests, first reads) are not what
	// an idle container costs: let them pass, then count.
	waitQuiet(ctx, proxy, n)
	before, ops0 := proxy.Count()
	if before == 0 {
		t.Fatal("no engine request went through the counting proxy: the daemon does not use DOCKER_HOST")
	}
	t.Logf("%d engine requests before the window (the start)", before)
	if err := ctxutil.Sleep(ctx, idleWindow); err != nil {
		t.Fatal(err)
	}
	after, ops1 := proxy.Count()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stopCancel()
	if code, out, errOut := aimi(stopCtx, "swarm", "stop", "--repo", repo, "--socket", sock); code != 0 {
		// Not the measurement: 100 stops on a loaded engine can outlast
		// the stop's bound; the test's cleanup removes the containers.
		t.Logf("stop: exit %d\n%s\n%s", code, out, errOut)
	}
	return float64(after-before) / float64(n) / idleWindow.Seconds(), dockertest.Delta(ops0, ops1)
}

// waitQuiet waits (up to a minute) until a second passes with fewer engine
// requests than containers.
func waitQuiet(ctx context.Context, p *dockertest.CountingProxy, n int) {
	deadline := time.Now().Add(time.Minute)
	last, _ := p.Count()
	for time.Now().Before(deadline) && ctxutil.Sleep(ctx, time.Second) == nil {
		now, _ := p.Count()
		if now-last < n {
			return
		}
		last = now
	}
}
