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
	"github.com/aimi-tools/swarm/swarmmode"
)

// absentImage is a reference no node has and none can pull (nothing
// listens on port 1, so the pull fails at once): a task of it is rejected
// by its node, a start failure as transient as the node's state. The spec
// names the user, so the manager need not have the image either.
func absentImage(c *clustertest.Cluster, name string) string {
	return "127.0.0.1:1/" + name + ":" + strings.ToLower(c.RunID)
}

// failing is a sandbox whose task no node can start until its image is
// tagged on the nodes.
type failing struct {
	id    string
	svc   string // its service, whose tasks the manager lists
	image string // absentImage
}

// createFailing creates a failing sandbox named name, removed when the test
// ends. Nothing reads the engine for it yet, so no start retry begins
// before the caller reads it.
func createFailing(t *testing.T, ctx context.Context, e *swarmmode.Engine, c *clustertest.Cluster, name string) failing {
	t.Helper()
	s := spec(t, name)
	s.Image, s.User = absentImage(c, name), "0"
	return failing{id: create(t, ctx, e, s), svc: serviceOf(t, name), image: s.Image}
}

// startFailing creates a failing sandbox named name, waits for it and
// delivers an empty request: Wait's reads of the engine drive the start
// retries from the first refusal on. It returns Wait's channel.
func startFailing(t *testing.T, ctx context.Context, e *swarmmode.Engine, c *clustertest.Cluster, name string) (failing, <-chan engine.Exit) {
	t.Helper()
	f := createFailing(t, ctx, e, c, name)
	exit := e.Wait(ctx, f.id)
	if err := e.WriteStdin(ctx, f.id, request(t, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	return f, exit
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
	// Not waited for: a read of the engine would retry the start before
	// the image is on the nodes.
	f := createFailing(t, ctx, e, c, "aimi-retried")
	if err := e.WriteStdin(ctx, f.id, request(t, map[string]any{"lines": 2, "exit": 5})); err != nil {
		t.Fatal(err)
	}
	first := waitStartFailures(t, ctx, c, f.svc, 1)[0]
	t.Logf("first attempt: %s on node %s: %s", first.Status.State, first.NodeID, first.Status.Err)
	for _, n := range c.Nodes {
		if err := n.Client.ImageTag(ctx, probe, f.image); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = n.Client.ImageRemove(context.Background(), f.image, image.RemoveOptions{}) })
	}
	ex := <-e.Wait(ctx, f.id)
	if ex.Err != nil || ex.Code != 5 || ex.Failure != "" {
		t.Fatalf("exit after the node could not start the first attempt: %+v", ex)
	}
	got := stdout(collect(t, mustLines(t, e, ctx, f.id, logcursor.Position{})))
	if len(got) == 0 || got[len(got)-1] != "done" || !contains(got, "line 1") {
		t.Fatalf("lines of the retried task: %q", got)
	}
	if n := len(ownTasks(t, ctx, c, f.svc)); n < 1 || serviceForceUpdate(t, ctx, c, f.svc) < 1 {
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
	f, exit := startFailing(t, ctx, e, c, "aimi-never-starts")
	ex := <-exit
	if ex.Err != nil || ex.Failure != engine.CodeStartFailed || !strings.Contains(ex.FailureReason, "3 of 3 attempts") || !strings.Contains(ex.FailureReason, "aimi swarm resume --retry-failed") {
		t.Fatalf("exit: %+v", ex)
	}
	if n := serviceForceUpdate(t, ctx, c, f.svc); n != 2 {
		t.Fatalf("%d retries asked of the service, want 2", n)
	}
	// Reading it again starts nothing more.
	if info, err := e.Inspect(ctx, f.id); err != nil || info.Failure != engine.CodeStartFailed || info.Running {
		t.Fatalf("inspect after the last attempt: %+v, %v", info, err)
	}
	if n := serviceForceUpdate(t, ctx, c, f.svc); n != 2 {
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
	f, exit := startFailing(t, ctx, e, c, "aimi-stop-retry")
	waitStartFailures(t, ctx, c, f.svc, 1)
	if err := e.Stop(ctx, f.id, time.Second); err != nil {
		t.Fatal(err)
	}
	asked := serviceForceUpdate(t, ctx, c, f.svc)
	select {
	case ex := <-exit:
		if ex.Err != nil {
			t.Fatalf("exit: %+v", ex)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return in 20 s after a stop during a start retry")
	}
	info, err := e.Inspect(ctx, f.id)
	if err != nil || info.Running || info.Status != "exited" {
		t.Fatalf("inspect after the stop: %+v, %v", info, err)
	}
	if n := serviceForceUpdate(t, ctx, c, f.svc); n != asked {
		t.Fatalf("the service was updated after the stop (forced updates %d, then %d)", asked, n)
	}
}
