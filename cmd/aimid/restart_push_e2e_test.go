package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/aimi-tools/swarm/state"
)

// TestKill9InLocalModeLosesNoPushedWork: the real daemon in local git mode,
// the real runner in the sandbox image, stories of about 4 s. The daemon is
// killed with SIGKILL once the first story is done and started again 12 s
// later, so the pushes of the next stories (and maybe the last one) meet a
// git service that is not there. Every container must still end completed
// with every story's commit on its branch in the checkout: the runner
// retries its pushes until the service is back, and is not completed before
// the service has its branch.
func TestKill9InLocalModeLosesNoPushedWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxtest.Image(t)
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	names := []string{"one-" + sfx, "two-" + sfx}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 3), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	agent := []string{"AIMI_AGENT_KIND=exec", `AIMI_AGENT_COMMAND=sleep 4; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`}
	p := startAimidLocal(t, sock, dataDir, image, agent...)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 3*time.Minute, "a story completed in every container", func(v api.SwarmView) bool {
		for _, c := range v.State.Containers {
			if c.StoryProgress.Completed < 1 {
				return false
			}
		}
		return len(v.State.Containers) == len(names)
	})
	p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(t)
	// The outage is the scenario: the containers go on while nobody serves
	// their pushes (their stories take 4 s; 12 s is about three of them).
	select {
	case <-time.After(12 * time.Second):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	p2 := startAimidLocal(t, sock, dataDir, image, agent...)
	view := waitFor(t, sock, repo, 5*time.Minute, "every container exited", allExited)
	for _, d := range view.Containers {
		if d.Status != string(state.StatusCompleted) || len(d.Errors) != 0 {
			t.Errorf("%s: %s, errors %+v", d.Name, d.Status, d.Errors)
		}
	}
	// Each completed container's branch reaches the checkout with every
	// story's file (publishing follows the exit by a moment).
	for _, n := range names {
		branch := "feat/" + n
		deadline := time.Now().Add(time.Minute)
		for _, id := range []string{"US-001", "US-002", "US-003"} {
			for exec.Command("git", "-C", repo, "cat-file", "-e", branch+":"+id+".txt").Run() != nil {
				if time.Now().After(deadline) {
					t.Fatalf("branch %s in the checkout lacks %s's commit (log: %s); daemon log:\n%s", branch, id,
						gitLogOrNone(repo, branch), p2.stderr.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	sw := validState(t, repo)
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress.Completed != 3 {
			t.Errorf("%s: %s %+v", c.ContainerName, c.Status, c.StoryProgress)
		}
	}
}

func gitLogOrNone(repo, branch string) string {
	out, err := exec.Command("git", "-C", repo, "log", "--oneline", branch).CombinedOutput()
	if err != nil {
		return "no such branch"
	}
	return string(out)
}
