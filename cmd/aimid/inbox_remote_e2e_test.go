package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// TestInboxAsksInRemoteGitMode: git.mode remote (origin an HTTPS server of
// the test's, no git service of the daemon's for the container), policy ask,
// the real runner and demo agent. The agent's write reaches the inbox
// through the container's own ask socket, under the repository it belongs
// to; the answers from the CLI let the story go on, and the container
// pushes its branch to origin.
func TestInboxAsksInRemoteGitMode(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, taskName := inboxRepo(t, "askremote", "[demo:ask-exec]")
	origin := startHTTPSOrigin(t, taskName)
	gitOut(t, repo, "remote", "add", "origin", origin.url)
	gitOut(t, repo, "config", "http.sslCAInfo", origin.caFile)
	caEnv := "GIT_SSL_CAINFO=" + origin.caFile
	for _, args := range [][]string{{"push", "-q", "origin", "main"}, {"fetch", "-q", "origin"}} {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), caEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env: []string{
			"AIMI_GIT_MODE=remote", "AIMI_GIT_ORIGIN_CA=" + origin.caFile, caEnv,
			"AIMI_AGENT_PERMISSION_POLICY=ask", "AIMI_AGENT_ASK_TIMEOUT=10m",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	w := waitInboxOrLog(t, run, p, "the agent's write request", func(r []api.PermissionRequest) bool { return len(r) == 1 })[0]
	if w.Kind != "edit" || w.RepoPath != repo || w.StoryID != "US-001" {
		t.Errorf("the write request: %+v", w)
	}
	if code, out, errOut := run("swarm", "answer", w.ID, "allow"); code != 0 || !strings.Contains(out, "answered allow") {
		t.Fatalf("answer: exit %d\n%s\n%s", code, out, errOut)
	}
	x := waitInboxOrLog(t, run, p, "the terminal command's request", func(r []api.PermissionRequest) bool {
		return len(r) == 1 && r[0].Kind == "execute"
	})[0]
	if code, out, errOut := run("swarm", "answer", x.ID, "reject"); code != 0 || !strings.Contains(out, "answered skip") {
		t.Fatalf("answer the command: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	if d := view.Containers[0]; d.Status != string(state.StatusCompleted) {
		t.Errorf("container %s: %s %+v", d.Name, d.Status, d.Errors)
	}
	if out, err := exec.Command("git", "-C", origin.bare, "rev-parse", "--verify", "refs/heads/feat/"+taskName).CombinedOutput(); err != nil {
		t.Errorf("origin lacks the container's branch: %v %s", err, out)
	}
}

// waitInboxOrLog is waitInbox for 3 minutes, with the daemon's log when the
// request never comes.
func waitInboxOrLog(t *testing.T, run func(args ...string) (int, string, string), p *proc, what string, cond func([]api.PermissionRequest) bool) []api.PermissionRequest {
	t.Helper()
	var reqs []api.PermissionRequest
	testwait.Eventually(t, 3*time.Minute, what, func() error {
		code, out, errOut := run("swarm", "inbox", "--json")
		if r, ok := decodeInbox(out); code == 0 && ok && cond(r) {
			reqs = r
			return nil
		}
		return fmt.Errorf("inbox: %s%s\ndaemon log:\n%s", out, errOut, tail(p.logs(), 6000))
	}, testwait.Every(300*time.Millisecond))
	return reqs
}

func decodeInbox(out string) ([]api.PermissionRequest, bool) {
	var in api.Inbox
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return nil, false
	}
	return in.Requests, true
}
