package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

func TestSwarmStartFollowEndToEnd(t *testing.T) {
	parallel(t)
	const secret = "sk-ant-e2e-secret-value"
	image := standinImage(t)
	repo := gitRepo(t, 3, "alpha", "beta", "gamma")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT":                   "pace|30ms;auto|3",
			"STANDIN_SCRIPT__GAMMA_TASKS_JSON": "pace|30ms;progress|US-001|in_progress|starting;progress|US-001|failed|tests fail;complete|failed|-",
			// A secret in the runner env (not a model key: those stay in the
			// daemon) must surface nowhere.
			"SERVICE_TOKEN": secret,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var answers []string
	aimi := func(ctx context.Context, args ...string) (int, string, string) {
		code, out, errOut := aimi(ctx, args...)
		answers = append(answers, out, errOut)
		return code, out, errOut
	}

	code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--follow", "--max", "2", "--repo", repo, "--socket", sock)
	if code != cli.ExitInvalid || !strings.Contains(errOut, "1 container(s) failed") {
		t.Fatalf("start --follow: exit %d (want 1: gamma fails)\n%s\n%s", code, out, errOut)
	}
	sw := validState(t, repo)
	if len(sw.Containers) != 3 {
		t.Fatalf("%d containers in state", len(sw.Containers))
	}
	name := checkFollowedStates(t, sw)
	// The secret does reach the runner: it is in the container's env.
	info, err := dockertest.Client(t).ContainerInspect(ctx, sw.Containers[0].ContainerID)
	if err != nil || !slices.Contains(info.Config.Env, "SERVICE_TOKEN="+secret) {
		t.Errorf("runner env lacks agent.env: %v", err)
	}
	for _, n := range []string{name["alpha"], name["beta"], name["gamma"]} {
		if n == "" || !strings.Contains(out, n) {
			t.Errorf("follow output does not show %q:\n%s", n, out)
		}
	}

	code, out, errOut = aimi(ctx, "swarm", "logs", name["alpha"], "--repo", repo, "--socket", sock)
	if code != 0 || strings.Count(out, "progress-update") != 6 || strings.Count(out, "completion") != 1 {
		t.Errorf("logs: exit %d\n%s\n%s", code, out, errOut)
	}
	// --follow on a finished container ends by itself, with the same lines.
	code, fout, errOut := aimi(ctx, "swarm", "logs", name["alpha"], "--follow", "--repo", repo, "--socket", sock)
	if code != 0 || fout != out {
		t.Errorf("logs --follow of a finished container: exit %d %s\n%s\nwant\n%s", code, errOut, fout, out)
	}
	aimi(ctx, "swarm", "status", "--json", "--repo", repo, "--socket", sock)
	code, out, _ = aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(out, name["gamma"]) || !strings.Contains(out, "failed") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	code, _, errOut = aimi(ctx, "swarm", "start", "--file", "alpha-tasks.json", "--repo", repo, "--socket", sock)
	if code != 0 {
		// a finished swarm is not active: a new start replaces it
		t.Errorf("start after a finished swarm: exit %d %s", code, errOut)
	}
	code, _, errOut = aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock)
	if code != 0 {
		t.Errorf("stop: exit %d %s", code, errOut)
	}
	code, out, errOut = aimi(ctx, "swarm", "cleanup", "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(out, "removed:") {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	p.stop(t)
	// The secret is in no log, answer, journal or state file.
	checkSecretInNoLogAnswerOrFile(t, secret, p.logs(), repo, answers)
}

// checkFollowedStates checks alpha and beta completed their 3 stories and
// gamma failed at none; it returns the containers' names by task file.
func checkFollowedStates(t *testing.T, sw *state.Swarm) map[string]string {
	t.Helper()
	// Container names are the engine's, shared by every test running
	// beside this one: a name another test holds makes the daemon pick
	// the next free one (aimi-alpha-2), so names are looked up by task
	// file.
	name := map[string]string{}
	for _, c := range sw.Containers {
		name[strings.TrimSuffix(filepath.Base(c.TaskFilePath), "-tasks.json")] = c.ContainerName
	}
	for _, c := range sw.Containers {
		want, done := state.StatusCompleted, 3
		if c.ContainerName == name["gamma"] {
			want, done = state.StatusFailed, 0
		}
		// acpPid is not checked here: a container is terminal by its
		// completion message a moment before its process exits.
		if c.Status != want || c.StoryProgress.Completed != done || c.StoryProgress.Total != 3 {
			t.Errorf("%s: %s %+v", c.ContainerName, c.Status, c.StoryProgress)
		}
	}
	return name
}

// checkSecretInNoLogAnswerOrFile checks secret is not in the daemon's
// logs, any file under repo's .aimi or any of the CLI's answers.
func checkSecretInNoLogAnswerOrFile(t *testing.T, secret, logs, repo string, answers []string) {
	t.Helper()
	if strings.Contains(logs, secret) {
		t.Error("the daemon logged the secret")
	}
	filepath.WalkDir(filepath.Join(repo, ".aimi"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret", path)
			}
		}
		return nil
	})
	for _, o := range answers {
		if strings.Contains(o, secret) {
			t.Errorf("a CLI answer holds the secret: %s", o)
		}
	}
}

func TestRealDaemonRefusalsReachTheCLI(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 2, "one", "two")
	os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "broken-tasks.json"), []byte(`{"schemaVersion":"3.0","metadata":{}}`), 0o644)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "trap;progress|US-001|in_progress|working;sleep|5m"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) (int, string, string) {
		return aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
	}

	code, _, errOut := run("swarm", "start", "--files", "one-tasks.json,broken-tasks.json")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "broken-tasks.json") || !strings.Contains(errOut, "nothing was started") {
		t.Fatalf("invalid task file: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an invalid start left a state file: %v", err)
	}
	if code, _, errOut = run("swarm", "start", "--file", "one-tasks.json"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	code, _, errOut = run("swarm", "start", "--file", "two-tasks.json")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "--append") {
		t.Fatalf("second start on an active swarm: exit %d %s", code, errOut)
	}
	if code, _, errOut = run("swarm", "start", "--file", "two-tasks.json", "--append"); code != 0 {
		t.Fatalf("--append: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 2*time.Minute, "both running", func(v api.SwarmView) bool {
		n := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning {
				n++
			}
		}
		return n == 2
	})
	// Names are the engine's, shared with other tests: read, not assumed.
	one, two := containerOf(t, v.State, "one").ContainerName, containerOf(t, v.State, "two").ContainerName
	code, _, errOut = run("swarm", "stop", "aimi-nope")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "aimi-nope") {
		t.Errorf("stop of an unknown container: exit %d %s", code, errOut)
	}
	code, out, errOut := run("swarm", "stop", one)
	if code != 0 || !strings.Contains(out, "stopped") {
		t.Errorf("stop one: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = run("swarm", "status", "--json")
	var sw map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &sw) != nil {
		t.Fatalf("status --json: exit %d %q", code, out)
	}
	statuses := map[string]string{}
	for _, c := range sw["containers"].([]any) {
		m := c.(map[string]any)
		statuses[m["containerName"].(string)] = m["status"].(string)
	}
	if statuses[one] != "stopped" || statuses[two] != "running" {
		t.Errorf("statuses after stopping one: %v", statuses)
	}
	if code, _, errOut = run("swarm", "stop"); code != 0 {
		t.Errorf("stop all: exit %d %s", code, errOut)
	}
	code, out, errOut = run("swarm", "cleanup")
	if code != 0 || !strings.Contains(out, one) || !strings.Contains(out, two) {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	p.stop(t)
}
