package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/gittest"
)

const hostedToken = "ghp_e2eHostedPublishToken000000000000007"

// TestLocalModePublishesToTheHostedRemoteAndOpensThePullRequest: the real
// daemon in local git mode on a checkout whose origin is a hosted remote
// (a local bare repository behind the checkout's insteadOf) and a GitHub API
// played by a local server implementing the one endpoint used. After the
// container completes, the daemon fetches the branch into the checkout,
// pushes it to origin with the token from its environment, opens the pull
// request, and the URL from the API's answer lands in the state file's
// prUrl. The token appears in none of the state file, journal, CLI answers
// or the daemon's log.
func TestLocalModePublishesToTheHostedRemoteAndOpensThePullRequest(t *testing.T) {
	parallel(t)
	if os.Getenv("AIMI_SKIP_DOCKER") != "" {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)

	github := gittest.NewGitHubPulls(t, hostedToken, "acme/widgets", "")
	host := strings.TrimPrefix(github.URL, "http://") // the web host of a non-default API is the API's host

	hosted, repo, linear := hostedRemoteCheckout(t, host)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_PUBLISH_GITHUB_API=" + github.URL, "GITHUB_TOKEN=" + hostedToken},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, answers := recordingAimi(ctx, repo, sock)
	// --local: the checkout has an origin, so local mode must be asked for.
	if code, out, errOut := run("swarm", "start", "--all", "--local", "--follow"); code != 0 {
		t.Fatalf("start --all --local --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 3*time.Minute, "the container exited and its pull request is in the state", func(v api.SwarmView) bool {
		return allExited(v) && len(v.State.Containers) == 1 && v.State.Containers[0].PRURL != nil
	})

	sw := validState(t, repo)
	c := sw.Containers[0]
	want := "https://" + host + "/acme/widgets/pull/1"
	if c.Status != "completed" || c.PRURL == nil || *c.PRURL != want {
		t.Fatalf("state file: status %s prUrl %v, want completed with %s", c.Status, c.PRURL, want)
	}
	if asked := github.Requests(); len(asked) != 1 || asked[0]["head"] != "feat/linear" || asked[0]["base"] != "main" {
		t.Errorf("pull requests asked for: %v, want one from feat/linear onto main", asked)
	}
	// The branch reached the hosted remote and the checkout, one commit per story.
	for _, where := range []string{hosted, repo} {
		if n := gitOut(t, where, "rev-list", "--count", "main..feat/linear"); n != "3" {
			t.Errorf("%s: feat/linear has %s commits over main, want 3", where, n)
		}
	}
	code, out, _ := run("swarm", "status")
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("status: exit %d, want the pull request URL:\n%s", code, out)
	}
	code, out, _ = run("swarm", "logs", "aimi-"+linear)
	if code != 0 || !strings.Contains(out, "pr "+want) {
		t.Errorf("logs: exit %d, want the daemon's completion with the pull request:\n%s", code, out)
	}

	// The token: nowhere but the daemon's environment. State and journals
	// are read before cleanup removes them, the log after the daemon ended.
	var seen strings.Builder
	filepath.WalkDir(filepath.Join(repo, ".aimi"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			seen.Write(b)
		}
		return nil
	})
	if code, out, errOut := run("swarm", "cleanup"); code != 0 {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	p.stop(t)
	for _, a := range *answers {
		seen.WriteString(a)
	}
	seen.WriteString(p.logs())
	if !strings.Contains(seen.String(), `"prUrl":"`+want+`"`) || !strings.Contains(seen.String(), "pull request open") {
		t.Error("the state file or the daemon's log does not mention the pull request; the leak check below would prove little")
	}
	if strings.Contains(seen.String(), hostedToken) {
		t.Error("the GitHub token leaked into the state file, a journal, a CLI answer or the daemon's log")
	}
}

// hostedRemoteCheckout makes a bare repository standing for acme/widgets
// on host and a checkout whose origin it is (through an insteadOf), with a
// linear task file pushed on main; it returns both and the task file's
// name.
func hostedRemoteCheckout(t *testing.T, host string) (hosted, repo, linear string) {
	t.Helper()
	// The hosted side: a bare repository standing in for acme/widgets.
	root := t.TempDir()
	hosted = filepath.Join(root, "acme", "widgets.git")
	os.MkdirAll(filepath.Dir(hosted), 0o755)
	gitOut(t, "", "init", "-q", "--bare", "-b", "main", hosted)

	repo = shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	linear = "hosted-" + sfx
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", linear+"-tasks.json"), []byte(localLinearTasks), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	gitOut(t, repo, "remote", "add", "origin", "https://"+host+"/acme/widgets.git")
	gitOut(t, repo, "config", "url.file://"+root+"/.insteadOf", "https://"+host+"/")
	gitOut(t, repo, "push", "-q", "origin", "main")
	removeProjectContainersAtEnd(t, repo)
	return hosted, repo, linear
}
