package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/testwait"
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
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
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
	p := launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true, Env: agent})
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
	p2 := launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true, Env: agent})
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
		testwait.Eventually(t, time.Minute, "every story's commit on "+branch+" in the checkout", func() error {
			for _, id := range []string{"US-001", "US-002", "US-003"} {
				if exec.Command("git", "-C", repo, "cat-file", "-e", branch+":"+id+".txt").Run() != nil {
					return fmt.Errorf("no commit of %s (log: %s); daemon log:\n%s", id, gitLogOrNone(repo, branch), p2.logs())
				}
			}
			return nil
		}, testwait.Every(200*time.Millisecond))
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

// TestAPushThatNeverArrivesIsFetchedFromTheContainer: the agent keeps the
// runner's pushes in the container (pushesGoNowhere), so the
// container ends failed with GIT_PUSH_FAILED naming the commits and `aimi
// swarm fetch`; that command then brings every story's commit out of the
// kept container into the checkout.
func TestAPushThatNeverArrivesIsFetchedFromTheContainer(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	name := "lost-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), taskFileJSON("feat/"+name, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env: []string{
			"AIMI_AGENT_KIND=exec",
			`AIMI_AGENT_COMMAND=` + pushesGoNowhere + `; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	d := view.Containers[0]
	var errs []string
	for _, e := range d.Errors {
		errs = append(errs, e.Code+" "+e.Message)
	}
	joined := strings.Join(errs, "\n")
	if d.Status != string(state.StatusFailed) || !strings.Contains(joined, "GIT_PUSH_FAILED") || !strings.Contains(joined, "aimi swarm fetch") {
		t.Fatalf("%s: %s, errors %q; want failed with GIT_PUSH_FAILED and how to fetch", d.Name, d.Status, errs)
	}
	branch := "feat/" + name
	if exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Run() == nil {
		t.Fatalf("branch %s reached the checkout although no push arrived", branch)
	}
	code, out, errOut := aimi(ctx, "swarm", "fetch", "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(out, "fetched "+d.Name) {
		t.Fatalf("fetch: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, id := range []string{"US-001", "US-002", "US-003"} {
		if err := exec.Command("git", "-C", repo, "cat-file", "-e", branch+":"+id+".txt").Run(); err != nil {
			t.Errorf("after fetch, %s in the checkout lacks %s's commit (log: %s)", branch, id, gitLogOrNone(repo, branch))
		}
	}
	// Nothing is left to fetch, and saying so is not an error.
	if code, out, _ := aimi(ctx, "swarm", "fetch", "--repo", repo, "--socket", sock); code != 0 || !strings.Contains(out, "nothing to fetch") {
		t.Errorf("second fetch: exit %d\n%s", code, out)
	}
}

// TestTwoRepositoriesStartTheSameTaskFileNamesAtOnce: two repositories
// whose task files have the same names start at the same moment through
// one real daemon in local git mode, round after round. Both starts
// succeed, the containers get distinct names, and every container of both
// clones, completes and reaches its checkout (a rollback of one start never
// revokes the other's tokens).
func TestTwoRepositoriesStartTheSameTaskFileNamesAtOnce(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true})
	// Names shared by both repositories, unique to this test run.
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(dir)))[:6]
	names := []string{"twin1-" + sfx, "twin2-" + sfx}
	for round := range 3 {
		var repos []string
		for range 2 {
			repo := shortDir(t)
			gitOut(t, repo, "init", "-q", "-b", "main")
			os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
			for _, n := range names {
				if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 2), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gitOut(t, repo, "add", "-A")
			gitOut(t, repo, "commit", "-q", "-m", "task files")
			removeProjectContainersAtEnd(t, repo)
			repos = append(repos, repo)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		type answer struct {
			code     int
			out, err string
		}
		answers := make([]answer, len(repos))
		done := make(chan struct{})
		for i, repo := range repos {
			go func() {
				c, o, e := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock)
				answers[i] = answer{c, o, e}
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		for i, a := range answers {
			if a.code != 0 {
				t.Fatalf("round %d: start of repository %d: exit %d\n%s\n%s", round, i, a.code, a.out, a.err)
			}
		}
		seen := map[string]bool{}
		for _, repo := range repos {
			view := waitFor(t, sock, repo, 4*time.Minute, "every container exited", allExited)
			for _, d := range view.Containers {
				if seen[d.Name] {
					t.Errorf("round %d: container name %s used twice", round, d.Name)
				}
				seen[d.Name] = true
				if d.Status != string(state.StatusCompleted) {
					t.Errorf("round %d: %s of %s: %s, errors %+v", round, d.Name, repo, d.Status, d.Errors)
				}
			}
		}
		cancel()
		if t.Failed() {
			return
		}
	}
}
