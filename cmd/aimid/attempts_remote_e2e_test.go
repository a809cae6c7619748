package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/state"
)

// remoteAttemptsVerify passes for a task file run once, and for an
// attempt only on attempt 2's a.txt.
const remoteAttemptsVerify = `AIMI_AGENT_VERIFY_COMMAND=[ "${AIMI_ATTEMPT:-0}" = 0 ] || grep -qx 'attempt 2' a.txt`

// TestRemoteModeAttemptsPublishThePickAndLandAuto: the real daemon,
// engine, runner and demo agent in remote git mode, origin an HTTPS server
// of the test's that also plays the GitHub API, with a publish token and
// land.auto. y runs once; x runs twice (--attempts 2, appended), and the
// verify command passes on attempt 2 alone.
//
//   - land.auto: y's completion lands it onto aimi/land/<swarm> in the
//     daemon's copy of origin, pushed to origin (with its pull request).
//   - The pick: the daemon is killed with SIGKILL right after the pick's
//     state write (AIMI_TEST_PICK_PAUSE=after); nothing is on origin's
//     feat/x yet. The restarted daemon (without land.auto) publishes that
//     pick: origin's feat/x is attempt 2's tip, pushed without force, with
//     one pull request of feat/x onto main; both attempts' branches stay on
//     origin; the checkout is not written.
//   - `aimi swarm pick` of attempt 1 moves origin's feat/x to its tip (off
//     attempt 2's, compare-and-swap); once somebody moved origin's feat/x,
//     picking attempt 2 back is refused, saying so, and origin's branch is
//     left as it is.
func TestRemoteModeAttemptsPublishThePickAndLandAuto(t *testing.T) {
	parallelLong(t)
	img := sandboxImage(t)
	github := gittest.NewGitHubPulls(t, hostedToken, "acme/widgets", "")
	origin := startHTTPSOriginWith(t, "acme/widgets", github.Config.Handler)
	repo, caEnv := remoteAttemptsCheckout(t, origin)
	tmp := shortDir(t)
	sock, data := filepath.Join(tmp, "aimid.sock"), filepath.Join(tmp, "data")
	apiURL := strings.TrimSuffix(origin.url, "/acme/widgets.git") + "/api/v3"
	env := []string{
		"AIMI_GIT_MODE=remote", "AIMI_GIT_ORIGIN_CA=" + origin.caFile, caEnv,
		"SSL_CERT_FILE=" + origin.caFile,
		"AIMI_PUBLISH_GITHUB_API=" + apiURL, "GITHUB_TOKEN=" + hostedToken,
		"AIMI_LAND_VERIFY_COMMAND=test -d .aimi", remoteAttemptsVerify,
	}
	p := launch(t, daemonOpts{Sock: sock, DataDir: data, Image: img, Local: true,
		Env: append(slices.Clone(env), "AIMI_LAND_AUTO=true", aimid.EnvPickPause+"="+orchestrator.PickPauseAfter)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(args ...string) (int, string, string) {
		return aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
	}
	if code, out, errOut := run("swarm", "start", "--file", "y-tasks.json", "--max", "6"); code != 0 {
		t.Fatalf("start y: %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { aimi(context.Background(), "swarm", "cleanup", "--repo", repo, "--socket", sock, "--force") })
	if code, out, errOut := run("swarm", "start", "--file", "x-tasks.json", "--append", "--attempts", "2"); code != 0 {
		t.Fatalf("start x --attempts 2: %d\n%s\n%s", code, out, errOut)
	}

	// land.auto: y's completion alone lands it, pushed to origin.
	var landBranch string
	testwait.Eventually(t, 7*time.Minute, "y landed on origin by land.auto, x's pick held after its write", func() error {
		for _, r := range github.Requests() {
			if h, _ := r["head"].(string); strings.HasPrefix(h, orchestrator.LandBranchPrefix) {
				landBranch = h
			}
		}
		if landBranch == "" {
			return fmt.Errorf("no pull request of an integration branch yet")
		}
		if !strings.Contains(p.logs(), orchestrator.LogPickPaused) {
			return fmt.Errorf("x's pick is not held yet")
		}
		return nil
	})
	if log := gitOut(t, origin.bare, "log", "--format=%B", "main.."+landBranch); !strings.Contains(log, "US-201") || strings.Contains(log, "US-101") {
		t.Fatalf("origin's %s, landed by land.auto, holds:\n%s\nwant y's story and no attempt of x", landBranch, log)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	set := validState(t, repo).AttemptSet(taskPath("x"))
	if set == nil || set.Pick == nil || set.Pick.Attempt != 2 || set.Pick.By != state.PickByDaemon || len(set.Attempts) != 2 {
		t.Fatalf("after a kill after the pick's write the file's attempts are %+v, want attempt 2 picked of 2", set)
	}
	if got := gitOutOrEmpty(origin.bare, "rev-parse", "--verify", "refs/heads/feat/x"); got != "" {
		t.Fatalf("origin's feat/x exists (%s) before the publish", got)
	}

	// The restarted daemon publishes that very pick on origin.
	launch(t, daemonOpts{Sock: sock, DataDir: data, Image: img, Local: true, Env: env})
	a1, a2 := set.Attempts[0], set.Attempts[1]
	testwait.Eventually(t, 3*time.Minute, "origin's feat/x at attempt 2's tip", func() error {
		if got := gitOutOrEmpty(origin.bare, "rev-parse", "--verify", "refs/heads/feat/x"); got == "" || got != set.Pick.Tip {
			return fmt.Errorf("origin's feat/x at %q, want %s", got, set.Pick.Tip)
		}
		return nil
	})
	checkRemoteAttempts(t, origin.bare, repo, set)
	if code, out, _ := run("swarm", "status"); code != 0 || !strings.Contains(out, "on origin at feat/x--a1") {
		t.Errorf("status: %d, want where each attempt's work is:\n%s", code, out)
	}
	checkPickPullRequest(t, github, "feat/x")

	code, out, errOut := run("swarm", "pick", a1.ContainerName)
	if code != 0 || !strings.Contains(out, "attempt 1 of 2 picked by hand") {
		t.Fatalf("pick %s: %d\n%s\n%s", a1.ContainerName, code, out, errOut)
	}
	if got := gitOut(t, origin.bare, "rev-parse", "refs/heads/feat/x"); got != a1.Tip {
		t.Fatalf("after the pick by hand origin's feat/x is at %s, want attempt 1's tip %s", got, a1.Tip)
	}
	// Somebody moves origin's feat/x: a pick by hand never drops it.
	moved := gitOut(t, origin.bare, "rev-parse", "refs/heads/main")
	gitOut(t, origin.bare, "update-ref", "refs/heads/feat/x", moved)
	code, out, errOut = run("swarm", "pick", a2.ContainerName)
	if code == 0 || !strings.Contains(out+errOut, "not at the attempt picked before") {
		t.Errorf("pick %s over a moved feat/x: %d, want refused saying so\n%s\n%s", a2.ContainerName, code, out, errOut)
	}
	if got := gitOut(t, origin.bare, "rev-parse", "refs/heads/feat/x"); got != moved {
		t.Errorf("origin's feat/x moved to %s over somebody's push", got)
	}
}

// remoteAttemptsCheckout is a checkout of origin with two task files on
// main: x, whose story writes a.txt with [demo:attempt], and y, which
// writes b.txt; and the environment its git needs for origin's CA.
func remoteAttemptsCheckout(t *testing.T, origin httpsOrigin) (string, string) {
	t.Helper()
	return checkoutOfOrigin(t, origin, map[string][]byte{
		"x": landTaskFile("x", "a.txt", "US-101", "The file says which attempt wrote it "+demoagent.MarkerAttempt),
		"y": landTaskFile("y", "b.txt", "US-201"),
	})
}

// checkRemoteAttempts: each attempt's branch stays on origin at its tip
// (which holds its own a.txt), attempt 2 alone qualified and its lines
// were counted; nothing reached the checkout.
func checkRemoteAttempts(t *testing.T, bare, repo string, set *state.AttemptSet) {
	t.Helper()
	for _, a := range set.Attempts {
		if a.Tip == "" || gitOutOrEmpty(bare, "rev-parse", "--verify", "refs/heads/"+a.BranchName) != a.Tip {
			t.Errorf("attempt %d: origin's %s is not at its tip %q", a.Attempt, a.BranchName, a.Tip)
			continue
		}
		if file := gitOut(t, bare, "show", a.Tip+":a.txt"); !strings.Contains(file, fmt.Sprintf("attempt %d", a.Attempt)) {
			t.Errorf("attempt %d's a.txt on origin:\n%s", a.Attempt, file)
		}
		if a.Qualified != (a.Attempt == 2) || a.Lines == nil || *a.Lines == 0 {
			t.Errorf("attempt %d: qualified %v lines %v, want only attempt 2 qualified, lines counted", a.Attempt, a.Qualified, a.Lines)
		}
	}
	for _, b := range []string{"feat/x", "feat/x--a1", "feat/x--a2"} {
		if got := gitOutOrEmpty(repo, "rev-parse", "--verify", "refs/heads/"+b); got != "" {
			t.Errorf("%s reached the checkout (remote mode writes none)", b)
		}
	}
}

// checkPickPullRequest: the pull requests asked for branch are of it onto
// main, naming the picked attempt.
func checkPickPullRequest(t *testing.T, github *gittest.GitHubPulls, branch string) {
	t.Helper()
	var asked []map[string]any
	// The pull request is asked for once the branch is on origin.
	testwait.Eventually(t, time.Minute, "the pull request of "+branch, func() error {
		asked = nil
		for _, r := range github.Requests() {
			if r["head"] == branch {
				asked = append(asked, r)
			}
		}
		if len(asked) == 0 {
			b, _ := json.Marshal(github.Requests())
			return fmt.Errorf("none asked for: %s", b)
		}
		return nil
	})
	for _, r := range asked {
		if body, _ := r["body"].(string); r["base"] != "main" || !strings.Contains(body, "attempt 2 of 2") {
			t.Errorf("pull request %v, want %s onto main naming attempt 2 of 2", r, branch)
		}
	}
}
