package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// shellToolUpdate edits .aimi/swarm-state.json as the aimi shell tool's
// swarm-update does: flock on swarm-state.json.lock, read with jq, set the
// fields (jq --arg makes every value it sets a string, so a pid becomes
// "12"), write a temp file and move it over the state file.
func shellToolUpdate(t *testing.T, repo, name string, set map[string]any) {
	t.Helper()
	dir := filepath.Join(repo, ".aimi")
	lock, err := os.OpenFile(filepath.Join(dir, "swarm-state.json.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	b, err := os.ReadFile(filepath.Join(dir, "swarm-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range doc["containers"].([]any) {
		m := c.(map[string]any)
		if m["containerName"] != name {
			continue
		}
		found = true
		for k, v := range set {
			m[k] = v
		}
		if pid, ok := m["acpPid"].(json.Number); ok {
			m["acpPid"] = pid.String()
		}
	}
	if !found {
		t.Fatalf("no container %s in the state file:\n%s", name, b)
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	tmp := filepath.Join(dir, "swarm-state.json.tmp."+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "swarm-state.json")); err != nil {
		t.Fatal(err)
	}
}

// readStateFile reads the state file as any tool would, failing the test
// when it is gone (moved aside).
func readStateFile(t *testing.T, repo string) *state.Swarm {
	t.Helper()
	sw, err := state.Open(repo).Load(context.Background())
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	return sw
}

// TestShellToolPRURLSurvivesTheDaemonsSavesAndRestart: a prUrl the shell
// tool sets on a completed container stays through the daemon's later
// saves (another container keeps it busy) and through a kill -9 and
// restart, and the shell tool's string pid does not make the daemon move
// the file aside.
func TestShellToolPRURLSurvivesTheDaemonsSavesAndRestart(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 3, "quick", "busy")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	scripts := map[string]string{
		"STANDIN_SCRIPT__QUICK_TASKS_JSON": "auto|3",
		// busy reports while the test edits the file, so the daemon saves
		// after the edit; it finishes with the daemon down.
		"STANDIN_SCRIPT__BUSY_TASKS_JSON": "progress|US-001|in_progress|a;sleep|4s;pace|700ms;progress|US-001|completed|b;progress|US-002|in_progress|c;progress|US-002|completed|d;progress|US-003|in_progress|e;progress|US-003|completed|f;sleep|3s;complete|completed|-",
	}
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, _, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, 2*time.Minute, "quick completed, busy running", func(v api.SwarmView) bool {
		q, b := v.State.ContainerForTask(taskPath("quick")), v.State.ContainerForTask(taskPath("busy"))
		return q != nil && b != nil && q.Status == state.StatusCompleted && b.Status == state.StatusRunning && b.StoryProgress.Completed == 0
	})
	const pr = "https://github.com/org/repo/pull/7"
	shellToolUpdate(t, repo, readStateFile(t, repo).ContainerForTask(taskPath("quick")).ContainerName, map[string]any{"prUrl": pr})
	// The daemon's save of busy's progress, after the edit, in the file.
	testwait.Eventually(t, 2*time.Minute, "busy's progress after the edit in the file", func() error {
		if c := readStateFile(t, repo).ContainerForTask(taskPath("busy")); c.StoryProgress.Completed < 2 {
			return fmt.Errorf("busy's progress: %+v", c.StoryProgress)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	sw := readStateFile(t, repo)
	if c := sw.ContainerForTask(taskPath("quick")); c.PRURL == nil || *c.PRURL != pr {
		t.Fatalf("after the daemon's saves: prUrl %v, want %s", c.PRURL, pr)
	}

	p2 := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	waitFor(t, sock, repo, 2*time.Minute, "every container terminal and exited", allExited)
	p2.stop(t)
	sw = validState(t, repo)
	if c := sw.ContainerForTask(taskPath("quick")); c.PRURL == nil || *c.PRURL != pr {
		t.Errorf("after a restart: prUrl %v, want %s", c.PRURL, pr)
	}
	if c := sw.ContainerForTask(taskPath("busy")); c.Status != state.StatusCompleted || c.StoryProgress.Completed != 3 {
		t.Errorf("busy after the restart: %s %+v", c.Status, c.StoryProgress)
	}
}

// TestShellToolStoppedIsAStop: `stopped` written by the shell tool on a
// running container and on a pending one stops both: the running one is
// stopped by the daemon, the pending one never starts, and the file says
// stopped for both.
func TestShellToolStoppedIsAStop(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 2, "first", "queued")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT": "trap;progress|US-001|in_progress|working;sleep|5m",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, _, errOut := run("swarm", "start", "--all", "--max", "1"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	var running, pending string
	waitFor(t, sock, repo, 2*time.Minute, "one running with progress, one pending", func(v api.SwarmView) bool {
		running, pending = "", ""
		for _, c := range v.State.Containers {
			switch {
			case c.Status == state.StatusRunning && c.StoryProgress.InProgress == 1:
				running = c.ContainerName
			case c.Status == state.StatusPending:
				pending = c.ContainerName
			}
		}
		return running != "" && pending != ""
	})
	shellToolUpdate(t, repo, pending, map[string]any{"status": "stopped"})
	shellToolUpdate(t, repo, running, map[string]any{"status": "stopped"})
	v := waitFor(t, sock, repo, time.Minute, "both stopped", func(v api.SwarmView) bool {
		for _, c := range v.State.Containers {
			if c.Status != state.StatusStopped {
				return false
			}
		}
		return true
	})
	for _, d := range v.Containers {
		if d.Name == pending && d.ExitCode != nil {
			t.Errorf("the pending container ran (exit code %d)", *d.ExitCode)
		}
	}
	p.stop(t)
	sw := validState(t, repo)
	for _, c := range sw.Containers {
		if c.Status != state.StatusStopped {
			t.Errorf("%s: %s in the file, want stopped", c.ContainerName, c.Status)
		}
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, pending+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Stream == state.StreamStdout {
			t.Errorf("the pending container printed %s: it ran", r.Message)
		}
	}
}

// TestStatusThroughTheDaemonLeavesTheShellToolsSwarmAlone: the daemon is
// asked for the status of a repository whose state file the shell tool
// wrote (its own containers, a pid as a string): answering is a read, so
// the file stays byte for byte as it was; the daemon neither fails the
// shell tool's running containers as lost nor moves the file aside.
func TestStatusThroughTheDaemonLeavesTheShellToolsSwarmAlone(t *testing.T) {
	parallel(t)
	repo := gitRepo(t, 1)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: "aimi-sandbox:latest"})
	file := shellToolSwarm
	path := filepath.Join(repo, ".aimi", "swarm-state.json")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "status"); code != 0 {
		t.Errorf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	// A clean stop flushes every state save the daemon had pending.
	p.stop(t)
	if b, err := os.ReadFile(path); err != nil || string(b) != file {
		t.Fatalf("the shell tool's file changed (%v):\n%s", err, b)
	}
	ents, _ := os.ReadDir(filepath.Join(repo, ".aimi"))
	for _, e := range ents {
		if strings.Contains(e.Name(), "corrupt") {
			t.Errorf("file moved aside: %s", e.Name())
		}
	}
}

// TestShellToolStoppedWhileTheDaemonIsDown: the shell tool marks a pending
// container stopped while the daemon is dead (kill -9) and the container
// holding the only slot finishes meanwhile; the daemon that comes back
// honours the stop before it would start the pending one, which never runs.
func TestShellToolStoppedWhileTheDaemonIsDown(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "first", "queued")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	scripts := map[string]string{
		"STANDIN_SCRIPT__FIRST_TASKS_JSON":  "progress|US-001|in_progress|working;sleep|3s;progress|US-001|completed|done;complete|completed|-",
		"STANDIN_SCRIPT__QUEUED_TASKS_JSON": "progress|US-001|in_progress|working;progress|US-001|completed|done;complete|completed|-",
	}
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	// The files are named in order: --all lists the newest first, and two
	// files written within one tick of the file system's clock tie (first
	// in name order) while a tick between them put queued first and gave
	// it the only slot (seen in make test).
	if code, _, errOut := run("swarm", "start", "--file", "first-tasks.json", "--file", "queued-tasks.json", "--max", "1"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	var firstID string
	waitFor(t, sock, repo, 2*time.Minute, "first running, queued pending", func(v api.SwarmView) bool {
		f, q := v.State.ContainerForTask(taskPath("first")), v.State.ContainerForTask(taskPath("queued"))
		if f != nil {
			firstID = f.ContainerID
		}
		return f != nil && q != nil && f.Status == state.StatusRunning && f.StoryProgress.InProgress == 1 && q.Status == state.StatusPending
	})
	if err := p.cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	queuedName := readStateFile(t, repo).ContainerForTask(taskPath("queued")).ContainerName
	shellToolUpdate(t, repo, queuedName, map[string]any{"status": "stopped"})
	eng := dockertest.Client(t)
	waitContainerExited(t, ctx, eng, firstID, time.Minute, "first to finish while the daemon was down")
	p = launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	v := waitFor(t, sock, repo, time.Minute, "first completed, queued stopped", func(v api.SwarmView) bool {
		f, q := v.State.ContainerForTask(taskPath("first")), v.State.ContainerForTask(taskPath("queued"))
		return f.Status == state.StatusCompleted && q.Status == state.StatusStopped
	})
	for _, d := range v.Containers {
		if d.Name == queuedName && d.ExitCode != nil {
			t.Errorf("the stopped pending container ran (exit code %d)", *d.ExitCode)
		}
	}
	p.stop(t)
	sw := validState(t, repo)
	if c := sw.ContainerForTask(taskPath("queued")); c.Status != state.StatusStopped {
		t.Errorf("queued: %s in the file, want stopped", c.Status)
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, queuedName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Stream == state.StreamStdout {
			t.Errorf("the stopped pending container printed %s: it ran", r.Message)
		}
	}
}

// shellToolSwarm is a state file the shell tool wrote for a swarm of its
// own: one running container (not on this engine), a pid as a string.
const shellToolSwarm = `{
  "swarmId": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
  "createdAt": "2026-11-22T10:31:00Z",
  "updatedAt": "2026-11-22T10:31:00Z",
  "containers": [
    {"containerId": "0123456789ab", "containerName": "aimi-shell-a", "taskFilePath": ".aimi/tasks/a-tasks.json",
     "branchName": "feat/a", "status": "running", "prUrl": null,
     "storyProgress": {"total": 2, "completed": 1, "failed": 0, "inProgress": 1, "pending": 0},
     "createdAt": "2026-11-22T10:31:00Z", "updatedAt": "2026-11-22T10:31:00Z", "acpPid": "12"}
  ]
}
`

// TestStartNextToTheShellToolsRunningSwarm: a plain start in a repository
// where the shell tool runs a swarm is refused as a start over an active
// swarm is (the file is left as it is); with --append the daemon's
// container joins the file and the shell tool's entry stays.
func TestStartNextToTheShellToolsRunningSwarm(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "mine")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "auto|1"},
	})
	path := filepath.Join(repo, ".aimi", "swarm-state.json")
	if err := os.WriteFile(path, []byte(shellToolSwarm), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	code, _, errOut := run("swarm", "start", "--all")
	if code == 0 || !strings.Contains(errOut, "--append") {
		t.Fatalf("start next to the shell tool's running swarm: exit %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(path); string(b) != shellToolSwarm {
		t.Fatalf("a refused start changed the file:\n%s", b)
	}
	if code, _, errOut = run("swarm", "start", "--all", "--append"); code != 0 {
		t.Fatalf("start --append: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, time.Minute, "mine completed", func(v api.SwarmView) bool {
		c := v.State.ContainerForTask(taskPath("mine"))
		return c != nil && c.Status == state.StatusCompleted
	})
	p.stop(t)
	sw := readStateFile(t, repo)
	if c := sw.Container("aimi-shell-a"); c == nil || c.Status != state.StatusRunning || c.ACPPID == nil || *c.ACPPID != 12 {
		t.Errorf("the shell tool's entry: %+v", c)
	}
	if c := sw.ContainerForTask(taskPath("mine")); c == nil || c.Status != state.StatusCompleted {
		t.Errorf("the daemon's entry: %+v", c)
	}
}
