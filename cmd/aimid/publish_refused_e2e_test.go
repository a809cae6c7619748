package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/publish"
	"github.com/aimi-tools/swarm/state"
)

// TestRefusedPublishKeepsTheWorkNamedAndSaysSo: the real daemon in local
// mode, the real sandbox image, and a user busy with the tasks' branches.
// feat/linear is checked out in the checkout; feat/diamond has a commit of
// the user's and is being rebased in a linked worktree (HEAD detached, the
// rebase stopped). Both containers complete, and neither branch is moved:
// the rebase continues as if the daemon had not been there. Each
// container's tip is named under refs/aimi/unpublished/<swarm id>/, so
// git gc --prune=now keeps it and, after cleanup removed the containers,
// the user still merges it. The refusals are in the journal (aimi swarm
// logs) and in aimi swarm status, with the ref and the command.
func TestRefusedPublishKeepsTheWorkNamedAndSaysSo(t *testing.T) {
	parallel(t)
	if testing.Short() || os.Getenv("AIMI_SKIP_DOCKER") != "" {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	b := newBusyCheckout(t)
	repo, wt, base, mine := b.repo, b.wt, b.base, b.mine
	removeProjectContainersAtEnd(t, repo)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local", "--follow"); code != 0 {
		t.Fatalf("start --all --local --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "both containers exited with their publish refused", bothPublishesRefused)
	sw := validState(t, repo)
	tips := map[string]string{}
	for branch, stories := range map[string]int{"feat/linear": 3, "feat/diamond": 4} {
		ref := publish.UnpublishedRef(contract.ContainerBranch{Swarm: sw.SwarmID, Branch: branch})
		tips[branch] = gitOut(t, repo, "rev-parse", ref)
		if n := gitOut(t, repo, "rev-list", "--count", base+".."+ref); n != fmt.Sprint(stories) && n != fmt.Sprint(stories+1) {
			t.Errorf("%s holds %s commits over the base, want the container's %d", ref, n, stories)
		}
	}
	if got := gitOut(t, repo, "rev-parse", "refs/heads/feat/linear"); got != base {
		t.Errorf("feat/linear, checked out, was moved to %s", got)
	}
	if got := gitOut(t, repo, "rev-parse", "refs/heads/feat/diamond"); got != mine {
		t.Errorf("feat/diamond, being rebased, was moved to %s", got)
	}
	for _, d := range v.Containers {
		if d.Status != string(state.StatusCompleted) {
			t.Errorf("%s: %s, want completed (its work was received)", d.Name, d.Status)
		}
	}
	checkRefusalsReported(t, run, sw.SwarmID, "aimi-"+b.linear, "aimi-"+b.diamond)

	// The rebase ends as it would have without the daemon.
	if out, err := exec.Command("git", "-C", wt, "-c", "user.name=Test", "-c", "user.email=test@example.com", "rebase", "--continue").CombinedOutput(); err != nil {
		t.Fatalf("rebase --continue after the publish: %v\n%s", err, out)
	}
	if got := gitOut(t, repo, "rev-parse", "refs/heads/feat/diamond"); got != mine {
		t.Errorf("feat/diamond after the rebase: %s, want the user's %s", got, mine)
	}

	// Cleanup removes the containers (the checkout holds their work);
	// git gc --prune=now keeps the named tips; the user merges them.
	if code, out, errOut := run("swarm", "cleanup"); code != 0 {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	p.stop(t)
	gitOut(t, repo, "gc", "-q", "--prune=now")
	for branch, tip := range tips {
		gitOut(t, repo, "cat-file", "-e", tip+"^{commit}")
		where := repo
		if branch == "feat/diamond" {
			where = wt
		}
		gitOut(t, where, "merge", "-q", "--no-edit", publish.UnpublishedRef(contract.ContainerBranch{Swarm: sw.SwarmID, Branch: branch}))
		if ok := exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", tip, "refs/heads/"+branch).Run() == nil; !ok {
			t.Errorf("%s does not hold the container's work after the merge", branch)
		}
	}
}

// busyCheckout is a repository whose user is busy with the tasks'
// branches: feat/linear is checked out in repo, and feat/diamond holds the
// user's commit mine and is being rebased in the linked worktree wt.
type busyCheckout struct {
	repo, wt        string
	base, mine      string // the commit of the task files; the user's commit on feat/diamond
	linear, diamond string // the task names, unique to repo
}

// newBusyCheckout makes a busyCheckout whose rebase stopped before its
// first step, so that a publish that moved either branch would be seen.
func newBusyCheckout(t *testing.T) busyCheckout {
	t.Helper()
	b := busyCheckout{repo: shortDir(t)}
	repo := b.repo
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	b.linear, b.diamond = "busy-linear-"+sfx, "busy-diamond-"+sfx
	for name, body := range map[string]string{b.linear: localLinearTasks, b.diamond: localDiamondTasks} {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	b.base = gitOut(t, repo, "rev-parse", "HEAD")
	// Case 1: the branch is checked out where the user works.
	gitOut(t, repo, "checkout", "-q", "-b", "feat/linear")
	// Case 2: a commit of the user's on feat/diamond, which a rebase in a
	// linked worktree holds, stopped before its first step.
	b.wt = filepath.Join(shortDir(t), "wt")
	gitOut(t, repo, "worktree", "add", "-q", "-b", "feat/diamond", b.wt, b.base)
	os.WriteFile(filepath.Join(b.wt, "mine.txt"), []byte("mine\n"), 0o644)
	gitOut(t, b.wt, "add", "mine.txt")
	gitOut(t, b.wt, "commit", "-q", "-m", "mine")
	b.mine = gitOut(t, b.wt, "rev-parse", "HEAD")
	gitOut(t, b.wt, "-c", "sequence.editor=sed -i 1ibreak", "rebase", "-q", "-i", "main")
	return b
}

// bothPublishesRefused tells whether every container of v exited and two
// of them carry the daemon's PUBLISH_FAILED: only then is the daemon done
// with both branches, so that what it left in the checkout can be checked.
func bothPublishesRefused(v api.SwarmView) bool {
	n := 0
	for _, d := range v.Containers {
		for _, e := range d.Errors {
			if e.Code == acpmsg.CodePublishFailed {
				n++
				break
			}
		}
	}
	return allExited(v) && n == 2
}

// checkRefusalsReported checks the user is told of both refusals where
// they look: aimi swarm status names each branch's ref and the merge that
// takes its work, and each container's journal (aimi swarm logs) holds
// the daemon's PUBLISH_FAILED.
func checkRefusalsReported(t *testing.T, run func(args ...string) (int, string, string), swarmID string, names ...string) {
	t.Helper()
	code, out, _ := run("swarm", "status")
	for _, branch := range []string{"feat/linear", "feat/diamond"} {
		if ref := publish.UnpublishedRef(contract.ContainerBranch{Swarm: swarmID, Branch: branch}); code != 0 || !strings.Contains(out, acpmsg.CodePublishFailed+": publish "+branch) || !strings.Contains(out, "merge "+ref) {
			t.Errorf("status: exit %d, want the refusal of %s with 'merge %s':\n%s", code, branch, ref, out)
		}
	}
	for _, name := range names {
		code, out, _ := run("swarm", "logs", name)
		if code != 0 || !strings.Contains(out, "daemon:error") || !strings.Contains(out, acpmsg.CodePublishFailed) {
			t.Errorf("logs %s: exit %d, want the daemon's PUBLISH_FAILED:\n%s", name, code, out)
		}
	}
}
