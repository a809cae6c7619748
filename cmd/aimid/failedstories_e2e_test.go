package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// failSecondOnce is an exec agent that logs every story it is given to
// runs.log and fails US-002 the first time: it leaves US-002.tried behind,
// which the runner commits with the failed story (one story at a time, a
// failed story's changes stay on the branch for inspection). A run that
// starts from that branch's tip finds the file, and US-002 succeeds.
const failSecondOnce = `echo "$AIMI_STORY_ID" >> runs.log; ` +
	`if [ "$AIMI_STORY_ID" = US-002 ] && [ ! -e US-002.tried ]; then touch US-002.tried; exit 1; fi; ` +
	`echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`

// failedStoriesRepo is a local-mode checkout (no origin) with one task
// file, run one story at a time: US-001; US-002 and US-004 after it;
// US-003 after US-002. It returns the repo and the task file's name.
func failedStoriesRepo(t *testing.T) (string, string) {
	t.Helper()
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	name := "partly-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	deps := map[int][]string{1: {}, 2: {"US-001"}, 3: {"US-002"}, 4: {"US-001"}}
	var stories []map[string]any
	for i := 1; i <= 4; i++ {
		stories = append(stories, map[string]any{
			"id": fmt.Sprintf("US-%03d", i), "title": fmt.Sprintf("Story %d", i),
			"description":        fmt.Sprintf("As a developer, I want step %d.", i),
			"acceptanceCriteria": []string{fmt.Sprintf("US-%03d.txt exists", i), "Typecheck passes"},
			"priority":           i, "status": "pending", "dependsOn": deps[i], "notes": "",
		})
	}
	b, _ := json.MarshalIndent(map[string]any{
		"schemaVersion": "3.0",
		"metadata": map[string]any{"title": "feat: partly", "type": "feat", "branchName": "feat/" + name,
			"createdAt": "2026-11-20", "planPath": nil, "maxConcurrency": 1},
		"userStories": stories,
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)
	return repo, name
}

// TestACompletedContainerWithFailedStoriesSaysSoAndReruns: a container
// whose runner finished every story, one failed and one skipped behind it,
// is completed as the message spec says, but not a success: the status
// summary says "completed with failures", `status --json --detail` carries
// it, and `start --follow` exits 1. `resume --retry-failed` reruns exactly
// the failed and the skipped story, from the branch's tip (the passed
// stories' commits stay, and are not run again), and the container ends
// completed without failures, its branch in the checkout.
func TestACompletedContainerWithFailedStoriesSaysSoAndReruns(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, name := failedStoriesRepo(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=exec", "AIMI_AGENT_COMMAND=" + failSecondOnce},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)

	code, out, errOut := run("swarm", "start", "--all", "--local", "--follow")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "completed with failed stories") {
		t.Errorf("start --follow of a container whose story failed: exit %d (want 1, naming it)\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	first := v.Containers[0]
	if c := v.State.Containers[0]; c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: 4, Completed: 2, Failed: 1}) {
		t.Fatalf("%s: %s %+v, errors %+v; want completed with US-001 and US-004 completed, US-002 failed, US-003 skipped\ndaemon log:\n%s",
			first.Name, c.Status, c.StoryProgress, first.Errors, p.logs())
	}
	code, out, errOut = run("swarm", "status")
	if code != 0 || !strings.Contains(out, "Summary: 1 completed with failures (1 total)") {
		t.Errorf("status: exit %d, want the summary to say completed with failures\n%s\n%s", code, out, errOut)
	}
	checkDetailSays(t, run, true)

	code, out, errOut = run("swarm", "resume", "--retry-failed")
	if code != 0 {
		t.Fatalf("resume --retry-failed: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 30*time.Second, "the rerun's new container", func(v api.SwarmView) bool {
		return v.Containers[0].ContainerID != first.ContainerID
	})
	v = waitFor(t, sock, repo, 4*time.Minute, "the rerun exited", allExited)
	if c := v.State.Containers[0]; c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: 4, Completed: 4}) {
		t.Fatalf("rerun %s: %s %+v, errors %+v; want completed, every story completed\ndaemon log:\n%s",
			c.ContainerName, c.Status, c.StoryProgress, v.Containers[0].Errors, p.logs())
	}
	checkRerunRanOnly(t, repo, v.State.SwarmID, v.Containers[0].Name, "US-002", "US-003")
	checkBranchRuns(t, repo, "feat/"+name, "US-001 US-002 US-004 US-002 US-003")
	code, out, _ = run("swarm", "status")
	if code != 0 || !strings.Contains(out, "Summary: 1 completed (1 total)") {
		t.Errorf("status after the rerun: exit %d\n%s", code, out)
	}
	checkDetailSays(t, run, false)
}

// checkDetailSays checks `status --json --detail` tells whether the one
// container completed with failed stories (read as the wire has it).
func checkDetailSays(t *testing.T, run func(...string) (int, string, string), withFailures bool) {
	t.Helper()
	code, out, errOut := run("swarm", "status", "--json", "--detail")
	var v struct {
		Summary *struct {
			CompletedWithFailures int `json:"completedWithFailures"`
		} `json:"summary"`
		Containers []struct {
			CompletedWithFailures bool `json:"completedWithFailures"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Containers) != 1 {
		t.Fatalf("status --json --detail: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if v.Containers[0].CompletedWithFailures != withFailures || v.Summary == nil || (v.Summary.CompletedWithFailures == 1) != withFailures {
		t.Errorf("status --json --detail: completedWithFailures %v, summary %+v; want %v\n%s", v.Containers[0].CompletedWithFailures, v.Summary, withFailures, out)
	}
}

// checkRerunRanOnly checks the rerun's journal started exactly the stories
// want.
func checkRerunRanOnly(t *testing.T, repo, swarmID, name string, want ...string) {
	t.Helper()
	var started []string
	for _, r := range journalOf(t, repo, swarmID, name) {
		if r.Message == nil {
			continue
		}
		var m acpmsg.Message
		if err := json.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok && p.Status == acpmsg.StoryInProgress {
			started = append(started, p.StoryID)
		}
	}
	if !slices.Equal(started, want) {
		t.Errorf("the rerun started %v; want exactly the failed and the skipped story %v", started, want)
	}
}

// checkBranchRuns checks the branch in the checkout (published there after
// the rerun) holds every story's file and logs the agent's runs in order:
// the rerun continued from the first run's tip.
func checkBranchRuns(t *testing.T, repo, branch, want string) {
	t.Helper()
	testwait.Eventually(t, time.Minute, fmt.Sprintf("runs.log on %s in the checkout to say %q", branch, want), func() error {
		if got := strings.Join(strings.Fields(gitOutOrEmpty(repo, "show", "refs/heads/"+branch+":runs.log")), " "); got != want {
			return fmt.Errorf("it says %q (log: %s)", got, gitLogOrNone(repo, "refs/heads/"+branch))
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	for i := 1; i <= 4; i++ {
		if gitOutOrEmpty(repo, "show", fmt.Sprintf("refs/heads/%s:US-%03d.txt", branch, i)) == "" {
			t.Errorf("%s lacks US-%03d.txt", branch, i)
		}
	}
}

// gitOutOrEmpty is git's output in repo, or "" when git fails (a file or
// branch not there yet).
func gitOutOrEmpty(repo string, args ...string) string {
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
