package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/swarmmode"
)

// TestSwarmBackendStop: `aimi swarm stop` on the swarm backend ends two
// running containers stopped within a deadline, with an exit code, and
// their journals hold the line from before the stop and the stopped
// completion the runner wrote on SIGTERM (after which the cluster deleted
// the task and its container).
func TestSwarmBackendStop(t *testing.T) {
	parallelCluster(t)
	image := standinImage(t)
	c := testCluster(t, image)
	repo := gitRepo(t, 2, "sstop1", "sstop2")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"trap;progress|US-001|in_progress|working;sleep|5m\"\ngit:\n  mode: remote\n"
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
	waitFor(t, sock, repo, clusterWork, "every container running with progress", func(v api.SwarmView) bool {
		for _, sc := range v.State.Containers {
			if sc.Status != state.StatusRunning || sc.StoryProgress.InProgress == 0 {
				return false
			}
		}
		return len(v.State.Containers) == 2
	})
	stopAt := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("stop: exit %d %s", code, errOut)
	}
	// The stop grace is 2 s; SIGTERM comes 2-4 s after the stop.
	waitFor(t, sock, repo, 45*time.Second, "every container stopped with an exit code", func(v api.SwarmView) bool {
		for _, sc := range v.State.Containers {
			if sc.Status != state.StatusStopped {
				return false
			}
		}
		return allExited(v)
	})
	t.Logf("stopped %s after the stop", time.Since(stopAt).Round(100*time.Millisecond))
	sw := validState(t, repo)
	for _, sc := range sw.Containers {
		code, out, errOut := aimi(ctx, "swarm", "logs", sc.ContainerName, "--repo", repo, "--socket", sock)
		if code != 0 || !strings.Contains(out, "working") || !strings.Contains(out, "stopped by SIGTERM") {
			t.Errorf("logs of %s: exit %d %s\n%s", sc.ContainerName, code, errOut, out)
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	eng, err := swarmmode.New(cctx, c.Manager().Client, swarmmode.Options{Instance: testInstance(sock), NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range sw.Containers {
		_ = eng.Remove(cctx, sc.ContainerID)
	}
}

// TestSwarmBackendStoppedBeforeAnyPushIsCleanedUp: a local-mode container
// on the swarm backend stopped before it completed a story (so before its
// first push) holds no commit: cleanup without --force removes it and its
// state entry (it is not kept for work the daemon could never read), fetch
// says there is nothing to fetch, and the next start of the task file
// gets the same container name again.
func TestSwarmBackendStoppedBeforeAnyPushIsCleanedUp(t *testing.T) {
	parallelCluster(t)
	image := standinImage(t)
	c := testCluster(t, image)
	repo := gitRepo(t, 2, "nopush")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"trap;progress|US-001|in_progress|working;sleep|5m\"\ngit:\n  mode: local\n"
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
	run := func(args ...string) (int, string, string) {
		return aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
	}
	if code, _, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, clusterWork, "the container running a story", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].StoryProgress.InProgress == 1
	})
	if code, _, errOut := run("swarm", "stop"); code != 0 {
		t.Fatalf("stop: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 45*time.Second, "the container stopped", allExited)
	name := v.Containers[0].Name
	if code, out, errOut := run("swarm", "fetch"); code != 0 || !strings.Contains(out, "no story of it completed") {
		t.Errorf("fetch: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := run("swarm", "cleanup")
	if code != 0 || !strings.Contains(out, "removed: "+name+"\n") || strings.Contains(out, "kept") || !strings.Contains(out, "swarm-state.json removed") {
		t.Fatalf("cleanup: exit %d, want %s removed and the state gone\n%s\n%s", code, name, out, errOut)
	}
	if code, _, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start again: exit %d %s", code, errOut)
	}
	// Running a story, as before the first stop: a task stopped before its
	// node started it has no exit code for allExited to see.
	v = waitFor(t, sock, repo, 3*time.Minute, "the container running a story again", func(v api.SwarmView) bool {
		return len(v.Containers) == 1 && len(v.State.Containers) == 1 && v.State.Containers[0].StoryProgress.InProgress == 1
	})
	if v.Containers[0].Name != name {
		t.Errorf("the second start named the container %s, want %s again", v.Containers[0].Name, name)
	}
	if code, _, errOut := run("swarm", "stop"); code != 0 {
		t.Errorf("stop: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, 45*time.Second, "the container stopped", allExited)
	if code, out, errOut := run("swarm", "cleanup"); code != 0 {
		t.Errorf("final cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
}
