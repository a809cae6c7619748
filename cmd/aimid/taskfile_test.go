package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/taskfiletest"
)

// absentImage names an image no test builds: these tests are refused
// before any container is made.
const absentImage = "aimi-test-absent:never"

// TestStartRefusesAFIFOAndALinkOutOfTheRepositoryAtOnce: a FIFO named as a
// task file would block a reader forever while it holds the repository's
// lock; the daemon refuses it at once, status still answers, and a link to
// /dev/zero or out of the repository is refused the same way.
func TestStartRefusesAFIFOAndALinkOutOfTheRepositoryAtOnce(t *testing.T) {
	parallel(t)
	repo := gitRepo(t, 1)
	dir := filepath.Join(repo, ".aimi", "tasks")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo-tasks.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(dir, "z-tasks.json"))
	outside := filepath.Join(shortDir(t), "x-tasks.json")
	os.WriteFile(outside, taskFileJSON("feat/outside", 1), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out-tasks.json"))
	sd := shortDir(t)
	sock := filepath.Join(sd, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(sd, "data"), Image: absentImage})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	for file, want := range map[string]string{"fifo-tasks.json": "FIFO", "z-tasks.json": "lead out", "out-tasks.json": "lead out"} {
		code, _, errOut := run("swarm", "start", "--file", ".aimi/tasks/"+file)
		if code != cli.ExitInvalid || !strings.Contains(errOut, want) {
			t.Errorf("start --file %s: exit %d, stderr %q, want %q", file, code, errOut, want)
		}
	}
	if code, out, errOut := run("swarm", "status"); ctx.Err() != nil || strings.Contains(errOut, "deadline") {
		t.Errorf("status after the refusals: exit %d %s %s", code, out, errOut)
	}
	// The repository's config is read as carefully.
	if err := syscall.Mkfifo(filepath.Join(repo, ".aimi", "config.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run("swarm", "start", "--all")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "config.yaml") || !strings.Contains(errOut, "FIFO") {
		t.Errorf("start with a FIFO as .aimi/config.yaml: exit %d, stderr %q", code, errOut)
	}
	p.stop(t)
}

// peakRSS is the process's high-water resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestHostileDependencyGraphIsRefusedInBoundedMemory: a 0.7 MB task file
// with a dependency cycle at every depth, each dependency listed 60 times,
// is refused with a bounded answer that names the repeats, and the daemon
// stays small while it checks it.
func TestHostileDependencyGraphIsRefusedInBoundedMemory(t *testing.T) {
	parallel(t)
	repo := gitRepo(t, 1)
	data := taskfiletest.HostileGraph(1000, 60)
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "hostile-tasks.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo)
	sd := shortDir(t)
	sock := filepath.Join(sd, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(sd, "data"), Image: absentImage})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	code, _, errOut := run("swarm", "start", "--file", ".aimi/tasks/hostile-tasks.json")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "more than once (60 times)") || len(errOut) > 256<<10 {
		t.Errorf("start: exit %d, %d bytes on stderr: %.2000s", code, len(errOut), errOut)
	}
	if rss := peakRSS(t, p.cmd.Process.Pid); rss > 300<<20 {
		t.Errorf("aimid's peak RSS is %d MB after checking a %d-byte task file", rss>>20, len(data))
	}
	p.stop(t)
}

// commitAll commits everything in repo, as a user commits task files before
// a swarm runs them.
func commitAll(t testing.TB, repo string) {
	t.Helper()
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "--allow-empty", "-m", "task files")
}

// TestStartRefusesTwoTaskFilesOnOneBranch: the real daemon refuses, naming
// the branch and both files, and creates nothing.
func TestStartRefusesTwoTaskFilesOnOneBranch(t *testing.T) {
	parallel(t)
	repo := gitRepo(t, 1, "one", "two")
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "two-tasks.json"), taskFileJSON("feat/one", 1), 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo)
	sd := shortDir(t)
	sock := filepath.Join(sd, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(sd, "data"), Image: absentImage})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	code, _, errOut := run("swarm", "start", "--all")
	if code != cli.ExitInvalid {
		t.Fatalf("start --all: exit %d %s", code, errOut)
	}
	for _, w := range []string{`"feat/one"`, ".aimi/tasks/one-tasks.json", ".aimi/tasks/two-tasks.json", "cannot run on one branch"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr does not name %s:\n%s", w, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); !os.IsNotExist(err) {
		t.Errorf("a refused start left a state file: %v", err)
	}
	p.stop(t)
}

// TestStartRunsTheCommittedTaskFile: an uncommitted task file is refused
// at start with a message that says to commit it (it used to be accepted
// and fail inside the container with TASK_FILE_NOT_FOUND), and a rerun
// whose branch already exists counts the branch's progress (it used to show
// "completed 0/3, 3 pending" while the container found everything done).
func TestStartRunsTheCommittedTaskFile(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 3, "rerun")
	// The branch exists on origin with every story completed.
	file := filepath.Join(repo, ".aimi", "tasks", "rerun-tasks.json")
	gitOut(t, repo, "checkout", "-q", "-b", "feat/rerun")
	os.WriteFile(file, bytes.ReplaceAll(taskFileJSON("feat/rerun", 3), []byte(`"status": "pending"`), []byte(`"status": "completed"`)), 0o644)
	gitOut(t, repo, "commit", "-q", "-am", "stories done")
	gitOut(t, repo, "checkout", "-q", "-")
	gitOut(t, repo, "update-ref", "refs/remotes/origin/feat/rerun", "feat/rerun")
	os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "fresh-tasks.json"), taskFileJSON("feat/fresh", 3), 0o644)

	sd := shortDir(t)
	sock := filepath.Join(sd, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(sd, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "sleep|60s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	code, _, errOut := run("swarm", "start", "--file", ".aimi/tasks/fresh-tasks.json")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "is not committed") || !strings.Contains(errOut, "git commit") {
		t.Errorf("start of an uncommitted task file: exit %d %s", code, errOut)
	}
	code, out, errOut := run("swarm", "start", "--file", ".aimi/tasks/rerun-tasks.json")
	if code != 0 {
		t.Fatalf("start of the rerun: exit %d %s %s", code, out, errOut)
	}
	sw := validState(t, repo)
	if pr := sw.Containers[0].StoryProgress; pr.Total != 3 || pr.Completed != 3 || pr.Pending != 0 {
		t.Errorf("rerun progress %+v, want the branch's 3 of 3 completed", pr)
	}
	run("swarm", "stop")
	p.stop(t)
}
