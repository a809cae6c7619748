package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/gittest"

	"github.com/docker/docker/api/types/container"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// runningOnEngine reports whether the container id runs, as the engine says.
func runningOnEngine(t *testing.T, ctx context.Context, id string) bool {
	t.Helper()
	in, err := dockertest.Client(t).ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return in.State != nil && in.State.Running
}

// TestACopyOfTheRepositoryDoesNotControlTheOriginalsSwarm: `cp -a` of a
// repository whose swarm runs copies its state file too. Every command
// given the copy answers that the swarm is the original's and touches
// nothing of it (container, state file); the copy can start a swarm of its
// own. A moved repository is refused the same way until it is moved back.
func TestACopyOfTheRepositoryDoesNotControlTheOriginalsSwarm(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "one")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "trap;progress|US-001|in_progress|working;sleep|5m"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, _, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 2*time.Minute, "the original's container running", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].Status == state.StatusRunning
	})
	// Names are the engine's, shared with other tests: read, not assumed.
	id, name := v.State.Containers[0].ContainerID, v.State.Containers[0].ContainerName

	cp := filepath.Join(shortDir(t), "copy")
	if out, err := exec.Command("cp", "-a", repo, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	removeProjectContainersAtEnd(t, cp)
	runCopy, _ := recordingAimi(ctx, cp, sock)
	for _, cmd := range [][]string{{"swarm", "stop"}, {"swarm", "stop", name}, {"swarm", "cleanup", "--force"}, {"swarm", "status"}} {
		code, out, errOut := runCopy(cmd...)
		if code == 0 || !strings.Contains(errOut, "copy") || !strings.Contains(errOut, repo) {
			t.Errorf("%v in the copy: exit %d, want a refusal naming the original as such\n%s%s", cmd, code, out, errOut)
		}
	}
	if !runningOnEngine(t, ctx, id) {
		t.Fatal("a command given the copy stopped the original's container")
	}
	if c := readStateFile(t, repo).Container(name); c == nil || c.Status != state.StatusRunning {
		t.Fatalf("the original's state entry: %+v, want running", c)
	}

	// The copy is a repository of its own: it may start its own swarm.
	if code, _, errOut := runCopy("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start in the copy: exit %d %s", code, errOut)
	}
	cv := waitFor(t, sock, cp, 2*time.Minute, "the copy's own container running", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].Status == state.StatusRunning
	})
	if cv.State.SwarmID == v.State.SwarmID || cv.State.Containers[0].ContainerID == id {
		t.Fatalf("the copy's swarm is the original's: %+v", cv.State)
	}
	if code, _, errOut := runCopy("swarm", "stop"); code != 0 {
		t.Fatalf("stop in the copy: exit %d %s", code, errOut)
	}
	if !runningOnEngine(t, ctx, id) {
		t.Fatal("stopping the copy's swarm stopped the original's container")
	}

	// A moved repository: refused, saying so, until it is back.
	moved := filepath.Join(filepath.Dir(repo), filepath.Base(repo)+"-moved")
	if err := os.Rename(repo, moved); err != nil {
		t.Fatal(err)
	}
	runMoved, _ := recordingAimi(ctx, moved, sock)
	code, out, errOut := runMoved("swarm", "stop")
	if err := os.Rename(moved, repo); err != nil {
		t.Fatal(err)
	}
	if code == 0 || !strings.Contains(errOut, "moved") {
		t.Errorf("stop in the moved repository: exit %d, want a refusal saying it was moved\n%s%s", code, out, errOut)
	}
	if !runningOnEngine(t, ctx, id) {
		t.Fatal("a stop given the moved repository stopped its container")
	}
	if code, _, errOut := run("swarm", "stop"); code != 0 {
		t.Fatalf("stop in the original: exit %d %s", code, errOut)
	}
	if c := readStateFile(t, repo).Container(name); c == nil || c.Status != state.StatusStopped {
		t.Fatalf("the original's state entry after its own stop: %+v, want stopped", c)
	}
	p.stop(t)
}

// TestCleanupLeavesContainersAimidNeverCreated: state entries edited to
// name another tool's containers (one by its id, one by a short id) are not
// followed: cleanup removes neither, says why, and removes what is its own.
func TestCleanupLeavesContainersAimidNeverCreated(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "one", "two", "three")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	others := map[string]string{} // name -> id
	for _, n := range []string{"others-a", "others-b"} {
		name := n + "-" + run[len(run)-8:]
		resp, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Labels: map[string]string{dockertest.LabelKey: run},
			Volumes: map[string]struct{}{"/data": {}}}, nil, nil, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		others[name] = resp.ID
	}

	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "auto|1"},
	})
	rn, _ := recordingAimi(ctx, repo, sock)
	if code, _, errOut := rn("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 2*time.Minute, "all exited", allExited)
	// Names are the engine's, shared with other tests: read, not assumed.
	names := map[string]string{} // task file -> container
	for _, c := range v.State.Containers {
		names[c.TaskFilePath] = c.ContainerName
	}
	one, two, three := names[".aimi/tasks/one-tasks.json"], names[".aimi/tasks/two-tasks.json"], names[".aimi/tasks/three-tasks.json"]
	p.stop(t)
	// Entries edited while the daemon is down: one names another tool's
	// container by its id, one by a short id (the engine takes either).
	i := 0
	for _, id := range others {
		ref := id
		if i == 1 {
			ref = id[:12]
		}
		shellToolUpdate(t, repo, []string{one, two}[i], map[string]any{"containerId": ref})
		i++
	}
	p = launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "auto|1"},
	})
	c := daemon.NewClient(sock)
	defer c.Close()
	rep, err := c.Cleanup(ctx, repo, true)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	for name, id := range others {
		if _, err := cli.ContainerInspect(ctx, id); err != nil {
			t.Errorf("another tool's container %s is gone after cleanup: %v", name, err)
		}
	}
	if len(rep.Removed) != 1 || rep.Removed[0] != three {
		t.Errorf("removed %v, want only %s", rep.Removed, three)
	}
	kept := map[string]string{}
	for _, k := range rep.Kept {
		kept[k.Name] = k.Reason
	}
	for _, n := range []string{one, two} {
		if !strings.Contains(kept[n], "left alone") {
			t.Errorf("cleanup says of %s: %q, want that it was left alone and why", n, kept[n])
		}
	}
	if rep.StateRemoved {
		t.Error("cleanup removed the state file with the entries it left alone")
	}
	p.stop(t)
}

// TestRepositoryPathsTheDaemonCannotKeepAreRefused: a repository whose
// path ends in a newline (directly or behind a symlink) is refused at
// once, the path shown with the newline visible, instead of working until
// a daemon restart breaks it.
func TestRepositoryPathsTheDaemonCannotKeepAreRefused(t *testing.T) {
	parallel(t)
	base := shortDir(t)
	repo := filepath.Join(base, "my repo é\n")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "init", "-q")
	gitOut(t, repo, "remote", "add", "origin", gittest.NowhereOrigin)
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "one-tasks.json"), taskFileJSON("feat/one", 1), 0o644)
	commitAll(t, repo)
	removeProjectContainersAtEnd(t, repo)
	link := filepath.Join(base, "link")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   standinImage(t),
		Scripts: map[string]string{"STANDIN_SCRIPT": "auto|1"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := daemon.NewClient(sock)
	defer c.Close()
	for _, path := range []string{repo, link} {
		_, err := c.Start(ctx, api.StartRequest{RepoPath: path, TaskFiles: []string{".aimi/tasks/one-tasks.json"}, Local: false})
		if err == nil || !strings.Contains(err.Error(), `\n`) || strings.Contains(err.Error(), "é\n") {
			t.Errorf("start in %q: %v, want a refusal showing the newline as \\n", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); err == nil {
		t.Error("a refused start wrote a state file")
	}
	p.stop(t)
}
