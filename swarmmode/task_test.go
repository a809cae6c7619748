package swarmmode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/engine"
)

// A task whose container was made but never started (a node shutting
// down while it starts: exit code 128, "starting container failed") is a
// start failure, not the runner's exit; an ordinary non-zero exit is not.
func TestFailedTaskThatNeverStartedIsAStartFailure(t *testing.T) {
	e := &Engine{}
	for _, c := range []struct {
		err  string
		code int
		want string
	}{
		{"starting container failed: context canceled", 128, engine.CodeStartFailed},
		{"task: non-zero exit (128)", 128, ""},
		{"task: non-zero exit (1)", 1, ""},
	} {
		var info engine.Info
		task := swarm.Task{Status: swarm.TaskStatus{State: swarm.TaskStateFailed, Err: c.err,
			ContainerStatus: &swarm.ContainerStatus{ContainerID: "c1", ExitCode: c.code}}}
		e.fillTask(context.Background(), &info, task)
		if info.Failure != c.want || info.ExitCode != c.code {
			t.Errorf("%q: failure %q exit %d, want %q %d", c.err, info.Failure, info.ExitCode, c.want, c.code)
		}
	}
}

// Which tasks are retried: one that never ran (rejected, failed before its
// program started) until the attempts are used up, after its backoff,
// once, and never on a stopped service; one that ran never.
func TestStartRetryDecision(t *testing.T) {
	now := time.Now()
	failedAt := now.Add(-time.Minute)
	task := func(state swarm.TaskState, err string, ctr bool, force uint64, at time.Time) swarm.Task {
		tk := swarm.Task{Spec: swarm.TaskSpec{ForceUpdate: force}, Status: swarm.TaskStatus{State: state, Err: err, Timestamp: at}}
		if ctr {
			tk.Status.ContainerStatus = &swarm.ContainerStatus{ContainerID: "c1", ExitCode: 128}
		}
		return tk
	}
	service := func(force uint64, stop bool) swarm.Service {
		s := swarm.Service{}
		s.Spec.TaskTemplate.ForceUpdate = force
		if stop {
			s.Spec.TaskTemplate.Placement = &swarm.Placement{Constraints: []string{stopConstraint}}
		}
		return s
	}
	busy := "starting container failed: unable to remount dir as readonly: device or resource busy"
	for _, c := range []struct {
		name string
		s    swarm.Service
		t    swarm.Task
		want startVerdict
	}{
		{"start failed", service(0, false), task(swarm.TaskStateFailed, busy, true, 0, failedAt), startDue},
		{"no container", service(0, false), task(swarm.TaskStateFailed, "no such network", false, 0, failedAt), startDue},
		{"rejected", service(1, false), task(swarm.TaskStateRejected, "No such image", false, 1, failedAt), startDue},
		{"within its backoff", service(1, false), task(swarm.TaskStateRejected, "No such image", false, 1, now.Add(-time.Second)), startBackoff},
		{"node clock ahead", service(0, false), task(swarm.TaskStateRejected, "No such image", false, 0, now.Add(time.Hour)), startDue},
		{"retry asked", service(1, false), task(swarm.TaskStateFailed, busy, true, 0, failedAt), startAsked},
		{"attempts used up", service(maxStartAttempts-1, false), task(swarm.TaskStateFailed, busy, true, maxStartAttempts-1, failedAt), startFinal},
		{"stopped", service(1, true), task(swarm.TaskStateFailed, busy, true, 0, failedAt), startFinal},
		{"the program ran", service(0, false), task(swarm.TaskStateFailed, "task: non-zero exit (128)", true, 0, failedAt), startFinal},
		{"completed", service(0, false), task(swarm.TaskStateComplete, "", true, 0, failedAt), startFinal},
		{"running", service(0, false), task(swarm.TaskStateRunning, "", true, 0, failedAt), startFinal},
	} {
		if got := startRetry(c.s, c.t, now); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

// The own task is the newest iteration's without the stop's constraint:
// a retry's, not the failed one before it, nor the stop's.
func TestOwnTaskIsTheNewestAttempt(t *testing.T) {
	base := time.Now()
	tk := func(id string, iter uint64, stop bool) swarm.Task {
		t := swarm.Task{ID: id, JobIteration: &swarm.Version{Index: iter}, Meta: swarm.Meta{CreatedAt: base.Add(time.Duration(iter) * time.Second)}}
		if stop {
			t.Spec.Placement = &swarm.Placement{Constraints: []string{stopConstraint}}
		}
		return t
	}
	got, ok := ownTask([]swarm.Task{tk("stop", 30, true), tk("retry", 20, false), tk("first", 10, false)})
	if !ok || got.ID != "retry" {
		t.Fatalf("own task %q, %v: want the retry's", got.ID, ok)
	}
	if _, ok := ownTask([]swarm.Task{tk("stop", 30, true)}); ok {
		t.Fatal("the stop's task taken as the own task")
	}
}

// The reason of a start failure says how often it was tried and what to do.
func TestStartFailedReasonSaysAttemptsAndWhatToDo(t *testing.T) {
	r := startFailedReason("the node could not start the task", swarm.Task{Spec: swarm.TaskSpec{ForceUpdate: 2}, Status: swarm.TaskStatus{Err: "starting container failed: busy"}})
	for _, want := range []string{"3 of 3 attempts", "starting container failed: busy", "aimi swarm resume --retry-failed"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason %q lacks %q", r, want)
		}
	}
}
