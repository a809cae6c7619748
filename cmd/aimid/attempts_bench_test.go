package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/client"

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
	p, sock, instance := warmDaemon(b, image, n)
	defer p.stop(b)
	var raw, warm []time.Duration
	var phases []map[string][]time.Duration
	for i := 0; i < b.N; i++ {
		raw = append(raw, rawFanOutDocker(b, cli, image, run, n, i))
		waitPool(b, context.Background(), cli, instance, n, p)
		_, all, ph := warmStartToWork(b, sock, p, "best", benchAttemptFiles, benchAttempts, i)
		warm, phases = append(warm, all), append(phases, ph)
	}
	reportPhases(b, phases)
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(med(warm).Seconds(), "s-attempts-all-work")
	b.ReportMetric(med(raw).Seconds(), "s-raw")
	b.ReportMetric(float64(med(warm))/float64(med(raw)), "attempts-ratio")
}
