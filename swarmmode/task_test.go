package swarmmode

import (
	"context"
	"testing"

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
