package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// breakFirstPushes is an exec agent whose stories write a file and, when
// the story's file was not there yet (a first run, not a rerun building on
// earlier work), keep the runner's pushes in the container: a first run
// ends failed with GIT_PUSH_FAILED, its commits only in the container; a
// rerun that starts from those commits pushes.
const breakFirstPushes = `[ -e "$AIMI_STORY_ID.txt" ] || ` + pushesGoNowhere + `; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`

// pushesGoNowhere, run by an exec agent in the workspace, makes every
// later push of the runner fail inside the container before a byte of it
// leaves: git may not use the http transport the runner pushes through
// (its relay on the sandbox's loopback). A proxy in the workspace's git
// config no longer does that: the sandbox's NO_PROXY names the loopback,
// so git goes past any proxy straight to the relay.
const pushesGoNowhere = `git config protocol.http.allow never`

// unpushedCommitsRe finds the commits a GIT_PUSH_FAILED completion names.
var unpushedCommitsRe = regexp.MustCompile(`were not received \(([0-9a-f ]+)`)

// oneTaskRepo is a local-mode checkout (no origin) with one committed task
// file of stories stories on branch feat/<name>; it returns the repo and
// the name.
func oneTaskRepo(t *testing.T, prefix string, stories int) (string, string) {
	t.Helper()
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	name := prefix + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), taskFileJSON("feat/"+name, stories), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)
	return repo, name
}

// failedWithUnpushedWork waits until repo's one container ended failed
// with GIT_PUSH_FAILED and returns the commits its completion names and
// the container's id.
func failedWithUnpushedWork(t *testing.T, sock, repo string) ([]string, string) {
	t.Helper()
	v := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	d := v.Containers[0]
	var msgs []string
	for _, e := range d.Errors {
		msgs = append(msgs, e.Code+" "+e.Message)
	}
	m := unpushedCommitsRe.FindStringSubmatch(strings.Join(msgs, "\n"))
	if d.Status != string(state.StatusFailed) || m == nil {
		t.Fatalf("%s: %s, errors %q; want failed with GIT_PUSH_FAILED naming the commits", d.Name, d.Status, msgs)
	}
	return strings.Fields(m[1]), d.ContainerID
}

// TestARerunTakesTheUnpushedWorkFirst: a container ends failed with
// GIT_PUSH_FAILED, its commits only in it. Rerunning its task file, by
// `aimi swarm resume --retry-failed` (one repository) or by a new `aimi
// swarm start` of the same task file (another), replaces that container:
// the commits it held must first be taken out of it and the rerun must
// build on them, so they end on the branch in the checkout.
func TestARerunTakesTheUnpushedWorkFirst(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=exec", "AIMI_AGENT_COMMAND=" + breakFirstPushes},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	for _, rerun := range []struct {
		how  string
		args func(name string) []string
	}{
		{"resume --retry-failed", func(string) []string { return []string{"swarm", "resume", "--retry-failed"} }},
		{"a new start", func(name string) []string {
			return []string{"swarm", "start", "--file", ".aimi/tasks/" + name + "-tasks.json", "--local"}
		}},
	} {
		t.Run(rerun.how, func(t *testing.T) {
			repo, name := oneTaskRepo(t, "rerun", 2)
			if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
				t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
			}
			held, old := failedWithUnpushedWork(t, sock, repo)
			args := append(rerun.args(name), "--repo", repo, "--socket", sock)
			if code, out, errOut := aimi(ctx, args...); code != 0 {
				t.Fatalf("%s: exit %d\n%s\n%s", rerun.how, code, out, errOut)
			}
			v := waitFor(t, sock, repo, 4*time.Minute, "the rerun exited", func(v api.SwarmView) bool {
				return allExited(v) && len(v.Containers) == 1 && v.Containers[0].ContainerID != old
			})
			if d := v.Containers[0]; d.Status != string(state.StatusCompleted) {
				t.Fatalf("rerun %s: %s, errors %+v; want completed (it builds on the taken commits, so its agent keeps the pushes)", d.Name, d.Status, d.Errors)
			}
			branch := "refs/heads/feat/" + name
			testwait.Eventually(t, time.Minute, "the commits the failed container held on "+branch+" in the checkout", func() error {
				for _, c := range held {
					if exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", c, branch).Run() != nil {
						return fmt.Errorf("no commit %s (log: %s); daemon log:\n%s", c, gitLogOrNone(repo, branch), p.logs())
					}
				}
				return nil
			}, testwait.Every(200*time.Millisecond))
		})
	}
}

// TestCleanupKeepsWorkARefusedPublishLeftInNoRef: the task's branch is
// checked out in the user's checkout, so publishing the container's
// branch is refused; its commits are fetched into the checkout's object
// store but no ref names them. `aimi swarm cleanup` without --force must
// not take that for received: after it and a `git gc --prune=now` the
// container's tip is still reachable somewhere (the container kept, or a
// ref of the checkout).
func TestCleanupKeepsWorkARefusedPublishLeftInNoRef(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, name := oneTaskRepo(t, "checkedout", 1)
	gitOut(t, repo, "checkout", "-q", "-b", "feat/"+name)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: dataDir,
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=exec", `AIMI_AGENT_COMMAND=echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	d := v.Containers[0]
	mirror := filepath.Join(dataDir, "git", "repos", v.State.SwarmID+".git")
	tip := gitOut(t, mirror, "rev-parse", "refs/heads/feat/"+name)
	if d.Status != string(state.StatusCompleted) {
		t.Fatalf("%s: %s, errors %+v; want completed (the git service received its branch)", d.Name, d.Status, d.Errors)
	}
	// The refused publish fetched the objects (waited for: publishing
	// follows the exit by a moment).
	testwait.Eventually(t, time.Minute, "the publish to fetch "+tip+" into the checkout", func() error {
		if exec.Command("git", "-C", repo, "cat-file", "-e", tip+"^{commit}").Run() != nil {
			return fmt.Errorf("not there; daemon log:\n%s", p.logs())
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	code, out, errOut := aimi(ctx, "swarm", "cleanup", "--repo", repo, "--socket", sock)
	if code != 0 {
		t.Fatalf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	gitOut(t, repo, "reflog", "expire", "--expire=now", "--all")
	gitOut(t, repo, "gc", "-q", "--prune=now")
	// Received means a ref reaches it: in the checkout (a keep ref), or
	// the git service's repository, kept and named in a note.
	inCheckout := exec.Command("git", "-C", repo, "cat-file", "-e", tip+"^{commit}").Run() == nil
	inMirror := exec.Command("git", "-C", mirror, "merge-base", "--is-ancestor", tip, "refs/heads/feat/"+name).Run() == nil
	if !inCheckout && !inMirror {
		t.Fatalf("after cleanup and git gc the container's commit %s is gone: neither the checkout nor the git service's repository has it\ncleanup said:\n%s", tip, out)
	}
	if !inCheckout && !(strings.Contains(out, "note: ") && strings.Contains(out, "feat/"+name)) {
		t.Errorf("the git service's repository alone holds %s, and cleanup did not say so:\n%s", tip, out)
	}
}
