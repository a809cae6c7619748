package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestSwarmBackendCleanupRemovesTheNodesContainers: the real daemon on the
// swarm backend runs two task files to completed, then `aimi swarm
// cleanup` removes them. Swarm mode on engine 20.10 keeps the tasks of a
// removed replicated job, so each node keeps its finished task container
// (its workspace and log with it); with engine.node_host naming the nodes'
// engines (swarmSettings), cleanup removes those containers from the nodes
// itself. Every
// container carrying the swarm's label is gone from every node.
func TestSwarmBackendCleanupRemovesTheNodesContainers(t *testing.T) {
	parallelCluster(t)
	image := standinImage(t)
	c := testCluster(t, image)
	repo := gitRepo(t, 2, "clean1", "clean2")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"auto|2\"\ngit:\n  mode: remote\n"
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    cleanEnv(),
		Env:     swarmSettings(c, image),
	})
	defer p.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, clusterWork, "every container exited", func(v api.SwarmView) bool {
		return len(v.Containers) == 2 && allExited(v)
	})
	swarmID := validState(t, repo).SwarmID
	if n := nodeContainers(t, ctx, c, swarmID); len(n) == 0 {
		t.Fatal("no task container of the swarm on any node before the cleanup: the test shows nothing")
	}
	code, out, errOut := aimi(ctx, "swarm", "cleanup", "--repo", repo, "--socket", sock)
	t.Logf("cleanup: exit %d\n%s%s", code, out, errOut)
	if code != 0 || !strings.Contains(out, "removed:") {
		t.Fatalf("cleanup: exit %d; want both containers removed", code)
	}
	// The node engines are asked before cleanup answers; a moment's grace
	// for an engine that deletes the container on its own meanwhile.
	testwait.Eventually(t, time.Minute, "no task container of the swarm left on the nodes after cleanup", func() error {
		if left := nodeContainers(t, ctx, c, swarmID); len(left) > 0 {
			return fmt.Errorf("%d left: %s", len(left), strings.Join(left, "; "))
		}
		return nil
	}, testwait.Every(time.Second))
}

// nodeContainers lists the containers of the swarm on every node, as
// "node: name (status)"; containers the test leaves are removed when it ends.
func nodeContainers(t *testing.T, ctx context.Context, c *clustertest.Cluster, swarmID string) []string {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", contract.LabelSwarmID+"="+swarmID))
	var out []string
	for _, n := range c.Nodes {
		cs, err := n.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatalf("list containers on %s: %v", n.Name, err)
		}
		for _, ct := range cs {
			out = append(out, fmt.Sprintf("%s: %s (%s)", n.Name, strings.Join(ct.Names, ","), ct.Status))
			id := ct.ID
			cli := n.Client
			t.Cleanup(func() {
				_ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			})
		}
	}
	return out
}
