package cli

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// progressing is a fake whose status advances one step per call.
func progressing(repo string, steps ...[]*state.Container) *daemontest.Swarms {
	var n atomic.Int32
	return &daemontest.Swarms{
		StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
			return swarmView(r.RepoPath, steps[0]...), nil
		},
		StatusFunc: func(string) (api.SwarmView, error) {
			i := int(n.Add(1)) - 1
			if i >= len(steps) {
				i = len(steps) - 1
			}
			v := swarmView(repo, steps[i]...)
			for _, c := range steps[i] {
				d := api.ContainerDetail{Name: c.ContainerName, Status: string(c.Status), LastOutput: "working on " + c.ContainerName, Finished: c.Status.Terminal()}
				if c.Status == state.StatusFailed {
					d.Errors = []api.ErrorDetail{{Code: "CONTAINER_OOM", Message: "killed by the kernel: out of memory"}}
				}
				v.Containers = append(v.Containers, d)
			}
			return v, nil
		},
	}
}

func TestSwarmStartFollowShowsProgressUntilAllAreDone(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json", "b-tasks.json")
	steps := [][]*state.Container{
		{ctr("aimi-a", state.StatusPending, 0, 2), ctr("aimi-b", state.StatusPending, 0, 1)},
		{ctr("aimi-a", state.StatusRunning, 1, 2), ctr("aimi-b", state.StatusRunning, 0, 1)},
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusRunning, 0, 1)},
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusCompleted, 1, 1)},
	}
	failSteps := [][]*state.Container{
		steps[0],
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusFailed, 0, 1)},
	}
	tests := []struct {
		name     string
		steps    [][]*state.Container
		tty      bool
		code     int
		wantOut  []string
		wantNone string
	}{
		{"plain lines, one per change, exit 0 when all completed", steps, false, 0,
			[]string{"aimi-a running 1/2 done: working on aimi-a", "aimi-a completed 2/2 done", "aimi-b completed 1/1 done"}, "\x1b["},
		{"a failed container makes exit 1 and shows its error", failSteps, false, ExitInvalid,
			[]string{"aimi-b failed 0/1 done: CONTAINER_OOM killed by the kernel", "aimi-b: CONTAINER_OOM: killed by the kernel: out of memory"}, "\x1b["},
		{"on a terminal the table is redrawn in place", steps, true, 0,
			[]string{"CONTAINER", "\x1b[3A\x1b[J", "completed"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := daemontest.Serve(t, progressing(repo, tt.steps...))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out := &syncBuffer{tty: tt.tty}
			r := runAimi(ctx, nil, out, "swarm", "start", "--all", "--follow", "--refresh", "10ms", "--repo", repo, "--socket", sock)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q\n%s", r.code, tt.code, r.err, r.out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(r.out, w) {
					t.Errorf("output lacks %q:\n%s", w, r.out)
				}
			}
			if tt.wantNone != "" && strings.Contains(r.out, tt.wantNone) {
				t.Errorf("output has %q:\n%q", tt.wantNone, r.out)
			}
			if !tt.tty && strings.Count(r.out, "aimi-a completed 2/2 done") != 1 {
				t.Errorf("an unchanged row was printed again:\n%s", r.out)
			}
		})
	}
}

// settling is a fake whose one container is completed from the first
// call, but which the daemon finishes (exit, publish) only from call
// finishedAt on.
func settling(repo string, finishedAt int32, calls *atomic.Int32) *daemontest.Swarms {
	view := func() api.SwarmView {
		n := calls.Add(1)
		c := ctr("aimi-a", state.StatusCompleted, 2, 2)
		v := swarmView(repo, c)
		v.Containers = []api.ContainerDetail{{Name: c.ContainerName, Status: string(c.Status), Finished: n >= finishedAt}}
		return v
	}
	return &daemontest.Swarms{
		StartFunc:  func(api.StartRequest) (api.SwarmView, error) { return view(), nil },
		StatusFunc: func(string) (api.SwarmView, error) { return view(), nil },
	}
}

func TestSwarmStartFollowWaitsUntilTheDaemonIsFinishedWithTheContainers(t *testing.T) {
	// Terminal by its completion is not yet done: the branch is published
	// after the process exits, and the command should return after that.
	repo := taskRepo(t, "a-tasks.json")
	var calls atomic.Int32
	sock, _ := daemontest.Serve(t, settling(repo, 5, &calls))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := runAimi(ctx, nil, nil, "swarm", "start", "--all", "--follow", "--refresh", "10ms", "--repo", repo, "--socket", sock)
	if r.code != 0 || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if n := calls.Load(); n < 5 {
		t.Errorf("follow returned after %d status calls, before the daemon had finished with the container", n)
	}
}

func TestFollowGivesUpWaitingForTheDaemonAfterSettle(t *testing.T) {
	// A runner that hangs after its completion must not hold the command.
	repo := taskRepo(t, "a-tasks.json")
	var calls atomic.Int32
	sock, _ := daemontest.Serve(t, settling(repo, 1<<30, &calls))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	client := daemon.NewClient(sock)
	defer client.Close()
	err := followSwarm(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, client, repo, 10*time.Millisecond, 100*time.Millisecond)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("followSwarm = %v (ctx %v), want nil well before the deadline", err, ctx.Err())
	}
	if !strings.Contains(errb.String(), "still finishing aimi-a") {
		t.Errorf("stderr %q, want a note that the daemon is still finishing aimi-a", errb.String())
	}
}

func TestSwarmStartFollowWhenTheDaemonGoesAwayExits3(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	fake := progressing(repo, []*state.Container{ctr("aimi-a", state.StatusRunning, 0, 2)})
	sock, srv := daemontest.Serve(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &syncBuffer{}
	done := make(chan result)
	go func() {
		done <- runAimi(ctx, nil, out, "swarm", "start", "--all", "--follow", "--refresh", "20ms", "--repo", repo, "--socket", sock)
	}()
	for !strings.Contains(out.String(), "aimi-a running") && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != ExitDaemon || !strings.Contains(r.err, "aimid &") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
}

func TestTTYRendererCutsLinesToTheTerminalWidth(t *testing.T) {
	var b bytes.Buffer
	r := &ttyRenderer{w: &b, width: 30}
	v := swarmView("/r", ctr("aimi-a-very-long-container-name-indeed", state.StatusRunning, 1, 2))
	r.render(v)
	r.render(v)
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		l = strings.TrimPrefix(l, "\x1b[2A\x1b[J")
		if n := len([]rune(l)); n >= 30 {
			t.Errorf("line of %d runes wraps a 30-column terminal: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "\x1b[2A\x1b[J") {
		t.Errorf("second drawing does not move up over the first: %q", b.String())
	}
}
