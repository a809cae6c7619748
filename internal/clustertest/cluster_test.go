package clustertest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

var (
	cluster *clustertest.Cluster
	hello   string // image on every node
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(dockertest.SkipEnv) == "1" {
		return clustertest.Run(m, clustertest.Options{}, func(*clustertest.Cluster) {})
	}
	cli, err := dockertest.NewClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	dir, err := os.MkdirTemp("", "clustertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tag, remove, err := dockertest.BuildGoImageE(ctx, cli, "clustertest-hello", dir, map[string]string{"/hello": "./internal/hello"}, nil, nil)
	defer func() { _ = remove(context.Background()) }()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hello = tag
	return clustertest.Run(m, clustertest.Options{Images: []string{tag}}, func(c *clustertest.Cluster) { cluster = c })
}

// A replicated job of two tasks runs to Complete on two different nodes of
// the cluster, from an image the harness loaded into the nodes, and the
// manager collects both tasks' output.
func TestReplicatedJobCompletesOnTwoNodes(t *testing.T) {
	c := clustertest.Need(t, cluster)
	t.Logf("cluster up in %s: %s", c.Took.Round(time.Millisecond), c.Manager().Host)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := c.Manager().Client
	two := uint64(2)
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "hello-" + c.RunID, Labels: map[string]string{dockertest.LabelKey: c.RunID}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: hello, Env: []string{"NODE={{.Node.Hostname}}"}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			// One task per node, so two tasks need two nodes.
			Placement: &swarm.Placement{MaxReplicas: 1},
		},
		Mode: swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: &two, TotalCompletions: &two}},
	}
	resp, err := m.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.ServiceRemove(context.Background(), resp.ID) })
	var tasks []swarm.Task
	for {
		tasks, err = m.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", resp.ID))})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, tk := range tasks {
			switch tk.Status.State {
			case swarm.TaskStateComplete:
				done++
			case swarm.TaskStateFailed, swarm.TaskStateRejected:
				t.Fatalf("task %s %s: %s", tk.ID, tk.Status.State, tk.Status.Err)
			}
		}
		if done == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tasks not complete: %+v", tasks)
		case <-time.After(200 * time.Millisecond):
		}
	}
	nodes := map[string]bool{}
	for _, tk := range tasks {
		nodes[tk.NodeID] = true
	}
	if len(nodes) != 2 {
		t.Fatalf("tasks ran on %d nodes, want 2", len(nodes))
	}
	rc, err := m.ServiceLogs(ctx, resp.ID, container.LogsOptions{ShowStdout: true, Timestamps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out strings.Builder
	if _, err := stdcopy.StdCopy(&out, io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "hello from "); n != 2 {
		t.Fatalf("service logs have %d hello lines, want 2:\n%s", n, out.String())
	}
	t.Logf("logs:\n%s", out.String())
}
