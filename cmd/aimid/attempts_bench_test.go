package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
)

// Best of N's start: 4 task files with --attempts 4 (16 containers).
const (
	benchAttemptFiles = 4
	benchAttempts     = 4
)

// BenchmarkWarmPoolAttempts measures what best of N costs to start:
// `aimi swarm start --all --local --attempts 4 --max 16` of 4 one-story
// task files with sandbox.warm_pool 16 and the pool full, until every
// attempt's first in_progress progress-update, next to 16 concurrent raw
// create+start of the same image in the same round (attempts-ratio,
// medians over b.N rounds; target: at most 0.35 of the raw start).
//
//	go test -run '^$' -bench WarmPoolAttempts -benchtime 3x -timeout 40m ./cmd/aimid
func BenchmarkWarmPoolAttempts(b *testing.B) {
	image := sandboxtest.Image(b)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	n := benchAttemptFiles * benchAttempts
	dir := shortDir(b)
	sock := filepath.Join(dir, "aimid.sock")
	instance := testInstance(sock)
	dockertest.Cleanup(b, contract.LabelDaemon, instance)
	p := launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
			"AIMI_SWARM_STOP_GRACE=1s", "AIMI_SANDBOX_WARM_POOL=" + strconv.Itoa(n),
		},
	})
	defer p.stop(b)
	var raw, warm []time.Duration
	for i := 0; i < b.N; i++ {
		raw = append(raw, rawFanOutDocker(b, cli, image, run, n, i))
		waitPool(b, context.Background(), cli, instance, n, p)
		warm = append(warm, attemptsTimeToWork(b, sock, p, i))
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(med(warm).Seconds(), "s-attempts-all-work")
	b.ReportMetric(med(raw).Seconds(), "s-raw")
	b.ReportMetric(float64(med(warm))/float64(med(raw)), "attempts-ratio")
}

// attemptsTimeToWork starts the attempts on the daemon at sock (its pool
// full) and returns when the last of them wrote its first in_progress
// update, counted from the start; every one must have been claimed.
func attemptsTimeToWork(b *testing.B, sock string, p *proc, round int) time.Duration {
	b.Helper()
	n := benchAttemptFiles * benchAttempts
	names := make([]string, benchAttemptFiles)
	sfx := dockertest.RunID()[:4]
	for i := range names {
		names[i] = fmt.Sprintf("best%02d-%d-%s", i, round, sfx)
	}
	repo := historyRepo(b, 0, 0, names...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	args := []string{"swarm", "start", "--all", "--local", "--max", strconv.Itoa(n), "--attempts", strconv.Itoa(benchAttempts), "--repo", repo, "--socket", sock}
	if code, _, errOut := aimi(ctx, args...); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	waitStatus(b, ctx, repo, sock, "done", terminalIn, n)
	sw := validState(b, repo)
	at := firstWork(b, repo, sw)
	if len(at) != n {
		b.Fatalf("%d of %d attempts wrote an in_progress update; daemon log:\n%s", len(at), n, p.stderr.String())
	}
	claimed := 0
	for _, c := range sw.Containers {
		if hasWarmNote(b, repo, sw.SwarmID, c.ContainerName) {
			claimed++
		}
	}
	if claimed != n {
		b.Errorf("%d of %d attempts were claimed from the pool", claimed, n)
	}
	var all time.Duration
	for _, t := range at {
		all = max(all, t.Sub(start))
	}
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return all
}
