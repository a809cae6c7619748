package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// retryBound is what `resume --retry-failed` of the two lost containers
// may take: each replaced its sandbox after a wait of the engine's whole
// removal window (30 s) for a relay task on the lost node before.
const retryBound = 30 * time.Second

// TestSwarmBackendRetryDoesNotWaitOnALostNodesRelay: with the manager and
// one worker drained, two containers and their relays all run on the other
// worker, which is then stopped. Both containers end NODE_LOST; `aimi swarm
// resume --retry-failed` replaces them without waiting for their relays'
// tasks on the stopped node (the cluster deletes those only once the node
// is back), says so in the daemon's log, and both run again to completed
// on the live nodes.
func TestSwarmBackendRetryDoesNotWaitOnALostNodesRelay(t *testing.T) {
	parallelClusterAlone(t)
	image := sandboxImage(t)
	c := testClusterAlone(t, image)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const lost = 1
	drainAllBut(t, ctx, c, lost)
	sfx := dockertest.RunID()[:6]
	names := []string{"rl1-" + sfx, "rl2-" + sfx}
	repo := historyRepo(t, 0, 0, names...)
	for _, n := range names {
		writeCommitted(t, repo, n, taskFileJSON("feat/"+n, 3))
	}
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "git:\n  mode: local\n",
		Base:    cleanEnv(),
		Env: append(swarmSettings(c, image),
			"AIMI_AGENT_KIND=exec", `AIMI_AGENT_COMMAND=sleep 4; echo done > "$AIMI_STORY_ID.txt"`),
	})
	defer p.stop(t)
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	worker := c.Nodes[lost].Name[strings.LastIndex(c.Nodes[lost].Name, "-")+1:] // its hostname
	waitFor(t, sock, repo, clusterWork, "both containers running on "+worker, func(v api.SwarmView) bool {
		on := 0
		for _, d := range v.Containers {
			if d.Node == worker && d.Status == string(state.StatusRunning) {
				on++
			}
		}
		return on == 2
	})
	if err := c.StopNode(ctx, lost); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartNode(context.Background(), lost); err != nil {
			t.Errorf("start the node again: %v", err)
		}
	})
	waitFor(t, sock, repo, 2*time.Minute, "both containers failed with the node", func(v api.SwarmView) bool {
		return len(v.Containers) == 2 && allExited(v)
	})
	for i := range c.Nodes {
		if i != lost {
			if err := c.SetAvailability(ctx, i, swarm.NodeAvailabilityActive); err != nil {
				t.Fatal(err)
			}
		}
	}
	began := time.Now()
	code, out, errOut := aimi(ctx, "swarm", "resume", "--retry-failed", "--repo", repo, "--socket", sock)
	took := time.Since(began)
	t.Logf("resume --retry-failed took %s: exit %d\n%s%s", took.Round(time.Millisecond), code, out, errOut)
	if code != 0 {
		t.Fatalf("resume --retry-failed: exit %d", code)
	}
	if took > retryBound {
		t.Errorf("resume --retry-failed of two containers took %s, want under %s: it waited on the lost node", took.Round(time.Second), retryBound)
	}
	if n := strings.Count(p.logs(), "not waiting for the relay's task on a lost node"); n < 2 {
		t.Errorf("the daemon's log says %d time(s) that it did not wait for a relay's task on the lost node, want 2", n)
	}
	waitFor(t, sock, repo, clusterWork, "both retried containers completed", func(v api.SwarmView) bool {
		done := 0
		for _, d := range v.Containers {
			if d.Status == string(state.StatusCompleted) && d.Finished && d.Node != worker {
				done++
			}
		}
		return done == 2
	})
}

// drainAllBut drains every node of c but node keep, until t ends: every
// task of the test is placed on keep.
func drainAllBut(t *testing.T, ctx context.Context, c *clustertest.Cluster, keep int) {
	t.Helper()
	for i := range c.Nodes {
		if i == keep {
			continue
		}
		if err := c.SetAvailability(ctx, i, swarm.NodeAvailabilityDrain); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.SetAvailability(context.Background(), i, swarm.NodeAvailabilityActive); err != nil {
				t.Errorf("make node %d active again: %v", i, err)
			}
		})
	}
}
