package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// timeToWorkContainers is how many one-story task files a round starts.
const timeToWorkContainers = 8

// BenchmarkTimeToWork measures how long the user waits for work to begin:
// from `aimi swarm start --all --local --max N` (the CLI, through the real
// daemon in local git mode, the real runner and the demo agent) until every
// container has written its first in_progress progress-update, which is
// after its clone, checkout and task-file read. Beside it, in the same
// round, the engine's figure: N concurrent raw create+start of the same
// image (as in BenchmarkFanOutUser). Once with a small repository and once
// with 200 MiB of incompressible history behind the tip, which a clone of
// the tip does not fetch. Making the repository is untimed.
//
//	go test -run '^$' -bench TimeToWork -benchtime 1x ./cmd/aimid
func BenchmarkTimeToWork(b *testing.B) {
	image := sandboxImage(b)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	sizes := []struct {
		name         string
		blobs, bytes int
	}{
		{"repo=small", 0, 0},
		{fmt.Sprintf("repo=%dMiB", largeHistoryBlobs*largeHistoryBlob>>20), largeHistoryBlobs, largeHistoryBlob},
	}
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			n := timeToWorkContainers
			var first, all, raw time.Duration
			for i := 0; i < b.N; i++ {
				raw += rawFanOutDocker(b, cli, image, run, n, i)
				f, a := userTimeToWork(b, image, n, sz.blobs, sz.bytes)
				first += f
				all += a
			}
			b.ReportMetric(first.Seconds()/float64(b.N), "s-first-work")
			b.ReportMetric(all.Seconds()/float64(b.N), "s-all-work")
			b.ReportMetric(raw.Seconds()/float64(b.N), "s-raw")
			b.ReportMetric(float64(all)/float64(raw), "ratio")
		})
	}
}

// userTimeToWork runs one swarm of n one-story task files on a fresh
// repository with the given history and returns, counted from `aimi swarm
// start`, when the first and when the last container's first in_progress
// progress-update was written (read from the journals once all are done).
func userTimeToWork(b *testing.B, image string, n, blobs, blob int) (first, all time.Duration) {
	first, all, _ = timeToWorkOn(b, image, "work", n, blobs, blob, nil)
	return first, all
}

// timeToWorkOn is userTimeToWork's run with task files named after
// prefix, the daemon's extra settings, and check (when set), which sees
// the daemon's socket, the repository and its swarm once every container
// is done, before the cleanup. It returns the daemon's socket too.
func timeToWorkOn(b *testing.B, image, prefix string, n, blobs, blob int, check func(sock, repo string, sw *state.Swarm), extraEnv ...string) (first, all time.Duration, sock string) {
	b.Helper()
	names := make([]string, n)
	sfx := dockertest.RunID()[:4]
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d-%s", prefix, i, sfx)
	}
	repo := historyRepo(b, blobs, blob, names...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sock, p, start := startLocalSwarm(b, ctx, image, repo, n, extraEnv...)
	defer p.stop(b)
	waitStatus(b, ctx, repo, sock, "done", terminalIn, n)
	sw := validState(b, repo)
	at := firstWork(b, repo, sw)
	if len(at) != n {
		b.Fatalf("%d of %d containers wrote an in_progress update; daemon log:\n%s", len(at), n, p.logs())
	}
	if check != nil {
		check(sock, repo, sw)
	}
	first = time.Duration(1<<63 - 1)
	for _, t := range at {
		first = min(first, t.Sub(start))
		all = max(all, t.Sub(start))
	}
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return first, all, sock
}

// terminalIn counts the containers that finished (completed, failed or
// stopped) in the state file printed by `aimi swarm status --json`.
func terminalIn(stateJSON string) int {
	var sw struct {
		Containers []struct {
			Status state.ContainerStatus `json:"status"`
		} `json:"containers"`
	}
	if json.Unmarshal([]byte(stateJSON), &sw) != nil {
		return 0
	}
	k := 0
	for _, c := range sw.Containers {
		if c.Status.Terminal() {
			k++
		}
	}
	return k
}
