package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/aimi-tools/swarm/state"
)

// BenchmarkWarmPool measures what the warm pool saves the user: `aimi swarm
// start --all --local --max 8` of 8 one-story task files with
// sandbox.warm_pool 8 and the pool full, until every container's first
// in_progress progress-update (its clone and the agent's start included),
// next to the same start on a daemon without a pool (the cold path) and 8
// concurrent raw create+start of the same image on an icc-off bridge, all
// in the same round. Medians over b.N rounds; the ratios are to the raw
// create+start. Also the memory of an idle pool sandbox (the engine's
// figure for its cgroup: the runner waiting on stdin).
//
//	go test -run '^$' -bench WarmPool -benchtime 5x ./cmd/aimid
func BenchmarkWarmPool(b *testing.B) {
	image := sandboxtest.Image(b)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	n := timeToWorkContainers
	p, sock, instance := warmDaemon(b, image, n)
	defer p.stop(b)
	var raw, cold, warm, warmFirst []time.Duration
	var phases []map[string][]time.Duration
	var idleMB float64
	for i := 0; i < b.N; i++ {
		raw = append(raw, rawFanOutDocker(b, cli, image, run, n, i))
		_, c := userTimeToWork(b, image, n, 0, 0)
		cold = append(cold, c)
		pool := waitPool(b, context.Background(), cli, instance, n, p)
		idleMB = idleMemoryMB(b, cli, pool)
		f, a, ph := warmTimeToWork(b, sock, p, n, i)
		warm, warmFirst, phases = append(warm, a), append(warmFirst, f), append(phases, ph)
	}
	reportPhases(b, phases)
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(med(warmFirst).Seconds(), "s-warm-first-work")
	b.ReportMetric(med(warm).Seconds(), "s-warm-all-work")
	b.ReportMetric(med(cold).Seconds(), "s-cold-all-work")
	b.ReportMetric(med(raw).Seconds(), "s-raw")
	b.ReportMetric(float64(med(warm))/float64(med(raw)), "warm-ratio")
	b.ReportMetric(float64(med(cold))/float64(med(raw)), "cold-ratio")
	b.ReportMetric(idleMB, "MB-per-idle-sandbox")
}

// warmDaemon launches a local-mode daemon of the demo agent on image
// with a warm pool of n, and returns it, its socket and its instance.
func warmDaemon(b *testing.B, image string, n int) (p *proc, sock, instance string) {
	b.Helper()
	dir := shortDir(b)
	sock = filepath.Join(dir, "aimid.sock")
	instance = testInstance(sock)
	dockertest.Cleanup(b, contract.LabelDaemon, instance)
	p = launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
			"AIMI_SWARM_STOP_GRACE=1s", "AIMI_SANDBOX_WARM_POOL=" + strconv.Itoa(n),
		},
	})
	return p, sock, instance
}

// warmTimeToWork starts n one-story task files on the daemon at sock (its
// pool full) and returns, counted from the start, when the first and the
// last container wrote their first in_progress update, and the moments of
// each container's way there (phaseTimes).
func warmTimeToWork(b *testing.B, sock string, p *proc, n, round int) (first, all time.Duration, phases map[string][]time.Duration) {
	return warmStartToWork(b, sock, p, "warm", n, 1, round)
}

// warmStartToWork is warmTimeToWork of files task files run attempts
// times each (files*attempts containers, all running at once), their
// names starting with prefix.
func warmStartToWork(b *testing.B, sock string, p *proc, prefix string, files, attempts, round int) (first, all time.Duration, phases map[string][]time.Duration) {
	b.Helper()
	n := files * attempts
	names := make([]string, files)
	sfx := dockertest.RunID()[:4]
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d-%d-%s", prefix, i, round, sfx)
	}
	repo := historyRepo(b, 0, 0, names...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	args := []string{"swarm", "start", "--all", "--local", "--max", strconv.Itoa(n), "--repo", repo, "--socket", sock}
	if attempts > 1 {
		args = append(args, "--attempts", strconv.Itoa(attempts))
	}
	if code, _, errOut := aimi(ctx, args...); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	waitStatus(b, ctx, repo, sock, "done", terminalIn, n)
	sw := validState(b, repo)
	at := firstWork(b, repo, sw)
	if len(at) != n {
		b.Fatalf("%d of %d containers wrote an in_progress update; daemon log:\n%s", len(at), n, p.stderr.String())
	}
	claimed := 0
	for _, c := range sw.Containers {
		if hasWarmNote(b, repo, sw.SwarmID, c.ContainerName) {
			claimed++
		}
	}
	if claimed != n {
		b.Errorf("%d of %d containers were claimed from the pool", claimed, n)
	}
	first = time.Duration(1<<63 - 1)
	for _, t := range at {
		first = min(first, t.Sub(start))
		all = max(all, t.Sub(start))
	}
	phases = phaseTimes(b, repo, sw, start)
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return first, all, phases
}

// BenchmarkWarmPoolEmpty measures what a start pays for trying a pool that
// has nothing waiting: the cold path's start of 8 one-story task files on
// a daemon with sandbox.warm_pool 8 whose pool is still empty, next to the
// same start on a daemon without a pool, alternated in each round
// (empty-pool-to-cold, medians over b.N rounds; target: no worse than the
// cold path). Apart from BenchmarkWarmPool: the empty pool's daemon fills
// its pool after its start and those sandboxes are removed again, which
// the warm rounds must not follow.
//
//	go test -run '^$' -bench WarmPoolEmpty -benchtime 5x ./cmd/aimid
func BenchmarkWarmPoolEmpty(b *testing.B) {
	image := sandboxtest.Image(b)
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	n := timeToWorkContainers
	var cold, empty []time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			_, c := userTimeToWork(b, image, n, 0, 0)
			cold, empty = append(cold, c), append(empty, emptyPoolTimeToWork(b, image, n))
		} else {
			e := emptyPoolTimeToWork(b, image, n)
			_, c := userTimeToWork(b, image, n, 0, 0)
			cold, empty = append(cold, c), append(empty, e)
		}
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(med(cold).Seconds(), "s-cold-all-work")
	b.ReportMetric(med(empty).Seconds(), "s-empty-pool-all-work")
	b.ReportMetric(float64(med(empty))/float64(med(cold)), "empty-pool-to-cold")
}

// emptyPoolTimeToWork is the cold path's start on a daemon with a pool of
// n that has no sandbox waiting yet (the start follows the daemon's own at
// once, while the pool's first sandbox is still being made): every
// container is created after the pool was asked; returned is when the
// last one's first in_progress was written, counted from the start.
func emptyPoolTimeToWork(b *testing.B, image string, n int) (all time.Duration) {
	b.Helper()
	noClaims := func(sock, repo string, sw *state.Swarm) {
		// Its pool's sandboxes, made once the start's containers worked,
		// if the run ends here.
		dockertest.Cleanup(b, contract.LabelDaemon, testInstance(sock))
		for _, c := range sw.Containers {
			if hasWarmNote(b, repo, sw.SwarmID, c.ContainerName) {
				b.Fatalf("%s was claimed from the pool: it was not empty at the start", c.ContainerName)
			}
		}
	}
	_, all, sock := timeToWorkOn(b, image, "empty", n, 0, 0, noClaims, "AIMI_SANDBOX_WARM_POOL="+strconv.Itoa(n))
	// Removed now, so that the next round does not run beside them.
	if err := dockertest.CleanupByLabel(context.Background(), contract.LabelDaemon, testInstance(sock)); err != nil {
		b.Error(err)
	}
	return all
}

// idleMemoryMB is the mean memory use of the pool sandboxes, as the
// engine's stats report it (cgroup usage less the page cache's inactive
// files, as `docker stats` shows).
func idleMemoryMB(b *testing.B, cli *client.Client, pool []dcontainer.InspectResponse) float64 {
	b.Helper()
	var sum float64
	for _, in := range pool {
		st, err := cli.ContainerStatsOneShot(context.Background(), in.ID)
		if err != nil {
			b.Fatal(err)
		}
		var s struct {
			Memory struct {
				Usage uint64            `json:"usage"`
				Stats map[string]uint64 `json:"stats"`
			} `json:"memory_stats"`
		}
		err = json.NewDecoder(st.Body).Decode(&s)
		st.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		inactive := s.Memory.Stats["inactive_file"] // cgroup v2
		if v, ok := s.Memory.Stats["total_inactive_file"]; ok {
			inactive = v // cgroup v1
		}
		used := s.Memory.Usage - min(s.Memory.Usage, inactive)
		sum += float64(used) / (1 << 20)
	}
	return sum / float64(len(pool))
}
