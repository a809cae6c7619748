package swarmmode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// absentImage is a reference no node has and none can pull (nothing
// listens on port 1, so the pull fails at once): a task of it is rejected
// by its node, a start failure as transient as the node's state. The spec
// names the user, so the manager need not have the image either.
func absentImage(c *clustertest.Cluster, name string) string {
	return "127.0.0.1:1/" + name + ":" + strings.ToLower(c.RunID)
}

// startFailedSpec is a spec whose task no node can start until the image
// is tagged on the nodes.
func startFailedSpec(t *testing.T, c *clustertest.Cluster, name string) engine.Spec {
	s := spec(t, name)
	s.Image, s.User = absentImage(c, name), "0"
	return s
}

// ownTasks lists the service's tasks that Stop did not make (those
// without the stop's placement constraint), read from the manager.
func ownTasks(t *testing.T, ctx context.Context, c *clustertest.Cluster, service string) []swarm.Task {
	t.Helper()
	tasks, err := c.Manager().Client.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", service))})
	if err != nil {
		t.Fatal(err)
	}
	var own []swarm.Task
	for _, task := range tasks {
		if p := task.Spec.Placement; p == nil || !contains(p.Constraints, "node.labels.org.aimi.stopped==true") {
			own = append(own, task)
		}
	}
	return own
}

// waitStartFailures waits, reading the manager's task list (never the
// engine, whose reads start the retries), until n of the service's tasks
// ended without running, and returns them.
func waitStartFailures(t *testing.T, ctx context.Context, c *clustertest.Cluster, service string, n int) []swarm.Task {
	t.Helper()
	for {
		var failed []swarm.Task
		for _, task := range ownTasks(t, ctx, c, service) {
			if task.Status.State == swarm.TaskStateRejected || task.Status.State == swarm.TaskStateFailed {
				failed = append(failed, task)
			}
		}
		if len(failed) >= n {
			return failed
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d start failures of %s seen", len(failed), n, service)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serviceForceUpdate reads the service's forced-update counter: how many
// iterations after the first were asked for.
func serviceForceUpdate(t *testing.T, ctx context.Context, c *clustertest.Cluster, service string) uint64 {
	t.Helper()
	s, _, err := c.Manager().Client.ServiceInspectWithRaw(ctx, service, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Spec.TaskTemplate.ForceUpdate
}

// A task its node could not start (rejected: its image is missing there)
// is started again: once the image is on the nodes, the next attempt runs
// to the program's own exit, and its output is read from that attempt.
func TestStartFailureIsRetried(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startFailedSpec(t, c, "aimi-retried")
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Remove(context.Background(), id) })
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{"lines": 2, "exit": 5})); err != nil {
		t.Fatal(err)
	}
	svc := serviceOf(t, "aimi-retried")
	first := waitStartFailures(t, ctx, c, svc, 1)[0]
	t.Logf("first attempt: %s on node %s: %s", first.Status.State, first.NodeID, first.Status.Err)
	for _, n := range c.Nodes {
		if err := n.Client.ImageTag(ctx, probe, s.Image); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = n.Client.ImageRemove(context.Background(), s.Image, image.RemoveOptions{}) })
	}
	ex := <-e.Wait(ctx, id)
	if ex.Err != nil || ex.Code != 5 || ex.Failure != "" {
		t.Fatalf("exit after the node could not start the first attempt: %+v", ex)
	}
	got := stdout(collect(t, mustLines(t, e, ctx, id, logcursor.Position{})))
	if len(got) == 0 || got[len(got)-1] != "done" || !contains(got, "line 1") {
		t.Fatalf("lines of the retried task: %q", got)
	}
	if n := len(ownTasks(t, ctx, c, svc)); n < 1 || serviceForceUpdate(t, ctx, c, svc) < 1 {
		t.Fatalf("no retry recorded on the service (%d own tasks)", n)
	}
}

// A task no node can start is tried a bounded number of times; then Wait
// reports CONTAINER_START_FAILED, saying how often it was tried and what
// to do.
func TestStartFailureRetriesAreBounded(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := e.Create(ctx, startFailedSpec(t, c, "aimi-never-starts"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Remove(context.Background(), id) })
	exit := e.Wait(ctx, id)
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	ex := <-exit
	if ex.Err != nil || ex.Failure != engine.CodeStartFailed || !strings.Contains(ex.FailureReason, "3 of 3 attempts") || !strings.Contains(ex.FailureReason, "aimi swarm resume --retry-failed") {
		t.Fatalf("exit: %+v", ex)
	}
	svc := serviceOf(t, "aimi-never-starts")
	if n := serviceForceUpdate(t, ctx, c, svc); n != 2 {
		t.Fatalf("%d retries asked of the service, want 2", n)
	}
	// Reading it again starts nothing more.
	if info, err := e.Inspect(ctx, id); err != nil || info.Failure != engine.CodeStartFailed || info.Running {
		t.Fatalf("inspect after the last attempt: %+v, %v", info, err)
	}
	if n := serviceForceUpdate(t, ctx, c, svc); n != 2 {
		t.Fatalf("%d retries asked of the service after a read, want 2", n)
	}
	t.Logf("reason: %s", ex.FailureReason)
}

// A stop while a start is being retried ends the sandbox at once and
// starts no further attempt.
func TestStopDuringStartRetry(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := e.Create(ctx, startFailedSpec(t, c, "aimi-stop-retry"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Remove(context.Background(), id) })
	exit := e.Wait(ctx, id)
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	svc := serviceOf(t, "aimi-stop-retry")
	waitStartFailures(t, ctx, c, svc, 1)
	if err := e.Stop(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	asked := serviceForceUpdate(t, ctx, c, svc)
	select {
	case ex := <-exit:
		if ex.Err != nil {
			t.Fatalf("exit: %+v", ex)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return in 20 s after a stop during a start retry")
	}
	info, err := e.Inspect(ctx, id)
	if err != nil || info.Running || info.Status != "exited" {
		t.Fatalf("inspect after the stop: %+v, %v", info, err)
	}
	if n := serviceForceUpdate(t, ctx, c, svc); n != asked {
		t.Fatalf("the service was updated after the stop (forced updates %d, then %d)", asked, n)
	}
}
