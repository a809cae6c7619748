package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// clusterFanOut is how many task files BenchmarkClusterFanOut starts.
const clusterFanOut = 12

// BenchmarkClusterFanOut measures fan-out on the three-node Swarm mode
// cluster: `aimi swarm start --all --local` of 12 task files through the
// real daemon on the swarm backend, until every one's task has started on
// its node, next to 12 concurrent raw ServiceCreate calls (replicated job,
// same image, same memory limit and reservation) until their tasks have
// started, in the same run. Rounds alternate raw and user; the ratio
// (target <= 1.2) is user / raw over all rounds. A task counts as started
// once its node created its container (running, or already finished).
//
//	go test -run '^$' -bench ClusterFanOut -benchtime=1x ./cmd/aimid
func BenchmarkClusterFanOut(b *testing.B) {
	image := sandboxImage(b)
	c := testCluster(b, image)
	m := c.Manager().Client
	var user, raw time.Duration
	for i := 0; i < b.N; i++ {
		raw += rawServiceFanOut(b, m, image, i)
		user += userClusterFanOut(b, c, image)
	}
	b.ReportMetric(user.Seconds()/float64(b.N), "s-user")
	b.ReportMetric(raw.Seconds()/float64(b.N), "s-raw")
	b.ReportMetric(float64(user)/float64(raw), "ratio")
}

// rawServiceFanOut creates clusterFanOut job services at once and waits
// until each task started; they are removed afterwards, untimed.
func rawServiceFanOut(b *testing.B, m *client.Client, image string, round int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	one := uint64(1)
	ids := make([]string, clusterFanOut)
	errs := make([]error, clusterFanOut)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clusterFanOut {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := m.ServiceCreate(ctx, swarm.ServiceSpec{
				Annotations: swarm.Annotations{Name: fmt.Sprintf("benchraw-%s-%d", run[:8], i), Labels: map[string]string{dockertest.LabelKey: run}},
				TaskTemplate: swarm.TaskSpec{
					ContainerSpec: &swarm.ContainerSpec{Image: image},
					Resources: &swarm.ResourceRequirements{Limits: &swarm.Limit{MemoryBytes: fanOutMemory},
						Reservations: &swarm.Resources{MemoryBytes: fanOutMemory}},
					RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
				},
				Mode: swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: &one, TotalCompletions: &one}},
			}, swarm.ServiceCreateOptions{})
			ids[i], errs[i] = resp.ID, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("raw service %d: %v", i, err)
		}
	}
	waitStarted(b, ctx, m, ids)
	took := time.Since(start)
	for _, id := range ids {
		m.ServiceRemove(ctx, id)
	}
	return took
}

// userClusterFanOut starts a daemon on the swarm backend in local git mode
// and times `aimi swarm start` of clusterFanOut one-story task files until
// every service's task started. Stopping, cleanup and the daemon's exit are
// untimed.
func userClusterFanOut(b *testing.B, c *clustertest.Cluster, image string) time.Duration {
	b.Helper()
	names := make([]string, clusterFanOut)
	for i := range names {
		names[i] = fmt.Sprintf("cfan%02d", i)
	}
	repo := localRepo(b, names...)
	dir := shortDir(b)
	sock := filepath.Join(dir, "aimid.sock")
	settings := append(swarmSettings(c, image), "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m")
	p := launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Base:    cleanEnv(),
		Env:     settings,
	})
	defer p.stop(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := c.Manager().Client
	start := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--max", strconv.Itoa(clusterFanOut), "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	var ids []string
	for len(ids) < clusterFanOut {
		svcs, err := m.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("label", contract.LabelProject+"="+repo))})
		if err != nil || ctx.Err() != nil {
			b.Fatalf("services of the swarm: %d, %v", len(ids), err)
		}
		ids = ids[:0]
		for _, s := range svcs {
			ids = append(ids, s.ID)
		}
		if len(ids) < clusterFanOut {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitStarted(b, ctx, m, ids)
	took := time.Since(start)
	aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock)
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	return took
}

// waitStarted polls until every service's task has a container on its
// node.
func waitStarted(b *testing.B, ctx context.Context, m *client.Client, services []string) {
	b.Helper()
	want := map[string]bool{}
	for _, id := range services {
		want[id] = true
	}
	for {
		tasks, err := m.TaskList(ctx, swarm.TaskListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		started := map[string]bool{}
		for _, t := range tasks {
			if want[t.ServiceID] && t.Status.ContainerStatus != nil && t.Status.ContainerStatus.ContainerID != "" {
				started[t.ServiceID] = true
			}
		}
		if len(started) == len(want) {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%d of %d tasks started", len(started), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
