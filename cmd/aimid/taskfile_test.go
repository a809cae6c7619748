package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/cli"
)

// absentImage names an image no test builds: these tests are refused
// before any container is made.
const absentImage = "aimi-test-absent:never"

// TestStartRefusesAFIFOAndALinkOutOfTheRepositoryAtOnce: a FIFO named as a
// task file would block a reader forever while it holds the repository's
// lock; the daemon refuses it at once, status still answers, and a link to
// /dev/zero or out of the repository is refused the same way.
func TestStartRefusesAFIFOAndALinkOutOfTheRepositoryAtOnce(t *testing.T) {
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
	p := startAimid(t, sock, filepath.Join(sd, "data"), absentImage, nil)
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
	p.stop(t)
}
