package swarmmode_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/swarmmode"
)

// Stop ends a running task with SIGTERM (the probe says "terminated" and
// exits 3) and returns once it ended; Wait reports the exit at once, with
// the code (or, when the cluster deleted the task before its code was
// read, the documented fallback). The output from before the stop and from
// its grace stays readable after the cluster deleted the task: for a
// follower open across the stop (as the daemon's journal is) and for a
// reader starting afterwards.
func TestStopKeepsOutputAndExitCode(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := create(t, ctx, e, spec(t, "aimi-stop"))
	exit := e.Wait(ctx, id)
	follow, err := e.Lines(ctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{"sleep": "5m", "listen": ":8080"})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, e, id, "listening")
	stopAt := time.Now()
	stopDone := make(chan error, 1)
	go func() { stopDone <- e.Stop(ctx, id, time.Second) }()
	var ex engine.Exit
	select {
	case ex = <-exit:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after the stop began")
	}
	exitAfter := time.Since(stopAt)
	if err := <-stopDone; err != nil {
		t.Fatal(err)
	}
	stopTook := time.Since(stopAt)
	info, err := e.Inspect(ctx, id)
	if err != nil || info.Status != "exited" || info.Running {
		t.Fatalf("inspect after stop: %+v, %v", info, err)
	}
	switch {
	case ex.Err == nil && ex.Code == 3 && info.ExitCode == 3:
	case ex.Err == nil && ex.Code == swarmmode.StopUnreadExit && info.Error == swarmmode.StopUnreadReason:
		t.Logf("the exit code was not read before the cluster deleted the task: %d, %q", ex.Code, info.Error)
	default:
		t.Fatalf("exit after stop: %+v (inspect: code %d, error %q)", ex, info.ExitCode, info.Error)
	}
	t.Logf("Wait returned after %s, Stop after %s, exit code %d", exitAfter.Round(time.Millisecond), stopTook.Round(time.Millisecond), ex.Code)
	check := func(who string, got []string) {
		t.Helper()
		seen := map[string]bool{}
		for _, l := range got {
			if seen[l] {
				t.Errorf("%s: line %q twice in %q", who, l, got)
			}
			seen[l] = true
		}
		if !seen["listening"] || got[len(got)-1] != "terminated" {
			t.Errorf("%s: lines %q: want the lines from before the stop and \"terminated\" last", who, got)
		}
	}
	check("follower open across the stop", stdout(collect(t, follow)))
	check("reader after the stop", stdout(collect(t, mustLines(t, e, ctx, id, logcursor.Position{}))))
	if err := e.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("stop again: %v", err)
	}

	// An engine that did not see the task end (a restarted daemon) finds
	// the sandbox exited once the cluster deleted the task: with the
	// documented fallback, at once.
	waitOwnTaskGone(t, ctx, c, serviceOf(t, "aimi-stop"))
	fresh, _ := newEngine(t)
	at := time.Now()
	ex = <-fresh.Wait(ctx, id)
	info, err = fresh.Inspect(ctx, id)
	if ex.Err != nil || ex.Code != swarmmode.StopUnreadExit || err != nil || info.Status != "exited" || info.Error != swarmmode.StopUnreadReason || time.Since(at) > 10*time.Second {
		t.Fatalf("another engine after the stop: exit %+v after %s, inspect %+v, %v", ex, time.Since(at), info, err)
	}
}

// waitOwnTaskGone waits until the cluster has deleted the stopped
// service's own task (the one without the stop's placement constraint).
func waitOwnTaskGone(t *testing.T, ctx context.Context, c *clustertest.Cluster, service string) {
	t.Helper()
	for {
		tasks, err := c.Manager().Client.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", service))})
		if err != nil {
			t.Fatal(err)
		}
		own := 0
		for _, task := range tasks {
			if p := task.Spec.Placement; p == nil || !contains(p.Constraints, "node.labels.org.aimi.stopped==true") {
				own++
			}
		}
		if own == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the stopped task of %s is still listed: %+v", service, tasks)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A sandbox stopped before its task-request was delivered (pending: no
// service yet) ends at once: Wait reports its exit, Inspect says exited,
// a late delivery is refused and starts nothing, and Remove leaves no
// object behind.
func TestStopBeforeDeliveryEndsIt(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := create(t, ctx, e, spec(t, "aimi-stop-pending", "PROBE_SECRET=x"))
	exit := e.Wait(ctx, id)
	if err := e.Stop(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case ex := <-exit:
		if ex.Err != nil {
			t.Fatalf("exit: %+v", ex)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return in 20 s after the stop of a sandbox that never started")
	}
	if info, err := e.Inspect(ctx, id); err != nil || info.Status != "exited" || info.Running {
		t.Fatalf("inspect after the stop: %+v, %v", info, err)
	}
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{})); err == nil {
		t.Fatal("the task-request was delivered after the stop")
	}
	m := c.Manager().Client
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"=aimi-stop-pending"), filters.Arg("label", contract.LabelSwarmID+"=test-"+t.Name()))
	if s, _ := m.ServiceList(ctx, swarm.ServiceListOptions{Filters: f}); len(s) != 0 {
		t.Fatalf("a service was made after the stop: %d", len(s))
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.ConfigList(ctx, swarm.ConfigListOptions{Filters: f}); len(s) != 0 {
		t.Errorf("configs left: %d", len(s))
	}
	if s, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: f}); len(s) != 0 {
		t.Errorf("secrets left: %d", len(s))
	}
}
