package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/gittest"

	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// builtBinary is a command built once per test run.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

var aimidBuild, aimiBuild builtBinary

// build builds pkg as name, with the race detector when the tests have
// it, the first time it is asked for.
func (b *builtBinary) build(t testing.TB, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		args := []string{"build", "-o", b.path}
		if raceBuild {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// aimidBinary builds cmd/aimid once per test run, with the race detector
// when the tests have it: the daemon's own goroutines are then raced by
// every end-to-end test, and raceReport fails the test that saw a race.
func aimidBinary(t testing.TB) string { return aimidBuild.build(t, "aimid", ".") }

// aimiBinary builds cmd/aimi once per test run, for the tests that run
// the command line as its own process (aimi mcp).
func aimiBinary(t testing.TB) string {
	return aimiBuild.build(t, "aimi", "github.com/aimi-tools/swarm/cmd/aimi")
}

// TestMain runs the tests with defaultParallel and removes what they
// shared: the built binary, the images, the cluster.
func TestMain(m *testing.M) {
	raiseParallel()
	code := m.Run()
	closeCluster()
	// The workspace images and their build containers first: those
	// containers are of the sandbox image, whose tag the engine keeps
	// while any container of it exists.
	removeWorkspaceImages()
	removeImages()
	for _, b := range []*builtBinary{&aimidBuild, &aimiBuild} {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
	os.Exit(code)
}

// shortDir is a temp dir with a short path (unix socket paths: 108 bytes).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "aimid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, _ = filepath.EvalSymlinks(d)
	return d
}

func taskFileJSON(branch string, n int) []byte {
	var stories []map[string]any
	for i := 1; i <= n; i++ {
		deps := []string{}
		if i > 1 {
			deps = append(deps, fmt.Sprintf("US-%03d", i-1))
		}
		stories = append(stories, map[string]any{
			"id": fmt.Sprintf("US-%03d", i), "title": fmt.Sprintf("Story %d", i),
			"description":        fmt.Sprintf("As a developer, I want step %d so that the feature grows.", i),
			"acceptanceCriteria": []string{fmt.Sprintf("File step-%d.txt exists", i), "Typecheck passes"},
			"priority":           i, "status": "pending", "dependsOn": deps, "notes": "",
		})
	}
	b, _ := json.MarshalIndent(map[string]any{
		"schemaVersion": "3.0",
		"metadata":      map[string]any{"title": "feat: " + branch, "type": "feat", "branchName": branch, "createdAt": "2026-11-20", "planPath": nil},
		"userStories":   stories,
	}, "", "  ")
	return b
}

// gitRepo makes a repository with an origin and task files
// .aimi/tasks/<name>-tasks.json with stories stories each.
func gitRepo(t testing.TB, stories int, names ...string) string {
	t.Helper()
	repo := shortDir(t)
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", gittest.NowhereOrigin}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	dir := filepath.Join(repo, ".aimi", "tasks")
	os.MkdirAll(dir, 0o755)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n+"-tasks.json"), taskFileJSON("feat/"+n, stories), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, repo)
	removeProjectContainersAtEnd(t, repo)
	return repo
}

// removeProjectContainersAtEnd removes, when the test ends, every container
// and network the daemon made for repo (labelled with the project path).
func removeProjectContainersAtEnd(t testing.TB, repo string) {
	t.Cleanup(func() {
		if t.Skipped() && os.Getenv(dockertest.SkipEnv) == "1" {
			return // skipped for want of an engine: nothing to remove, and none to ask
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dockertest.CleanupByLabel(ctx, contract.LabelProject, repo); err != nil {
			t.Errorf("cleanup containers of %s: %v", repo, err)
		}
	})
}

func TestBadConfigOrFlagsStopTheDaemonBeforeItStarts(t *testing.T) {
	parallel(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad size flag names the key and the fix", []string{"--sandbox-memory", "4x"}, 1, `sandbox.memory: "4x" is not a size (from --sandbox-memory); use a number with k, m or g, e.g. 4g`},
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag: --bogus"},
		{"positional argument", []string{"start"}, 2, "takes flags only"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "--log-level"},
		{"bad instance name", []string{"--instance", "a b"}, 2, "--instance"},
		{"unknown engine backend names the key and the choices", []string{"--engine-backend", "kube"}, 1, `engine.backend: "kube" is not allowed (from --engine-backend); use one of docker, swarm`},
		{"engine host that is no endpoint names the key", []string{"--engine-host", "manager:2376"}, 1, `engine.host: "manager:2376" is not an Engine API endpoint`},
		{"swarm backend and local git without an address names git.address", []string{"--engine-backend", "swarm"}, 1, "git.address"},
		{"a malformed model upstream names its key", []string{"--models-openai-url", "api.openai.com/v1"}, 1, `models.openai.url: "api.openai.com/v1" is not a usable upstream`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkDaemonRefuses(t, tt.args, tt.code, tt.want)
		})
	}
}

// TestSwarmBackendOnAnEngineOutsideASwarmSaysHowToFix: the test machine's
// engine is not in a swarm, and the daemon says how to fix that.
func TestSwarmBackendOnAnEngineOutsideASwarmSaysHowToFix(t *testing.T) {
	parallel(t)
	dockertest.Client(t) // the engine is asked: fail, or skip under AIMI_SKIP_DOCKER=1
	checkDaemonRefuses(t, []string{"--engine-backend", "swarm", "--git-mode", "remote"}, 1,
		"is not part of a swarm (state \"inactive\"): point engine.host at a Swarm mode manager, run 'docker swarm init' there, or set engine.backend to docker")
}

// checkDaemonRefuses runs the daemon with args and checks it exits with
// code, saying want.
func checkDaemonRefuses(t *testing.T, args []string, code int, want string) {
	t.Helper()
	var stderr bytes.Buffer
	dir := shortDir(t)
	args = append([]string{"--socket", filepath.Join(dir, "s.sock"), "--data-dir", filepath.Join(dir, "data"), "--config", "-"}, args...)
	if got := run(context.Background(), args, &stderr, nil); got != code || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, stderr:\n%s", got, stderr.String())
	}
}

func TestSecondDaemonOnALiveSocketRefusesAndSIGTERMCleansUp(t *testing.T) {
	parallel(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "run", "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: "aimi-sandbox:latest"})

	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--socket", sock, "--data-dir", filepath.Join(dir, "data2"), "--config", "-"}, &stderr, nil)
	if code != 1 || !strings.Contains(stderr.String(), "already running") {
		t.Fatalf("second daemon: exit %d\n%s", code, stderr.String())
	}
	if _, err := daemon.NewClient(sock).Health(context.Background()); err != nil {
		t.Fatalf("the first daemon suffered: %v", err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("aimid exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after SIGTERM: %v", err)
	}
	code, _, errOut := aimi(context.Background(), "swarm", "stop", "--socket", sock, "--repo", dir)
	if code != cli.ExitDaemon || !strings.Contains(errOut, "aimid &") {
		t.Errorf("aimi without daemon: exit %d %s", code, errOut)
	}
}

func TestSecondDaemonOfAnInstanceOnOneEngineRefusesNamingTheFirst(t *testing.T) {
	parallel(t)
	dir := shortDir(t)
	instance := "test-two-" + dockertest.RunID()
	sockA, dataA := filepath.Join(dir, "a", "aimid.sock"), filepath.Join(dir, "a-data")
	a := launch(t, daemonOpts{Sock: sockA, DataDir: dataA, Config: "git:\n  mode: remote\n", Instance: instance})

	// Another socket, another data dir, the same instance on the same engine.
	var stderr bytes.Buffer
	sockB, dataB := filepath.Join(dir, "b", "aimid.sock"), filepath.Join(dir, "b-data")
	// Bounded: a daemon that wrongly starts serves until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, []string{"--socket", sockB, "--data-dir", dataB, "--config", "-", "--instance", instance, "--git-mode", "remote"}, &stderr, nil)
	if code != 1 {
		t.Fatalf("second daemon of the instance: exit %d\n%s", code, stderr.String())
	}
	t.Log(stderr.String())
	for _, want := range []string{"another aimid of instance", fmt.Sprintf("pid %d", a.cmd.Process.Pid), "socket " + sockA, "data dir " + dataA, "--instance"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("refusal lacks %q:\n%s", want, stderr.String())
		}
	}
	if _, err := daemon.NewClient(sockA).Health(context.Background()); err != nil {
		t.Fatalf("the first daemon suffered: %v", err)
	}

	// A clean stop gives the instance back.
	a.stop(t)
	b := launch(t, daemonOpts{Sock: sockB, DataDir: dataB, Config: "git:\n  mode: remote\n", Instance: instance})

	// A killed daemon's marker is stale: the next daemon takes over.
	b.cmd.Process.Kill()
	b.wait(t)
	c := launch(t, daemonOpts{
		Sock:     filepath.Join(dir, "c", "aimid.sock"),
		DataDir:  filepath.Join(dir, "c-data"),
		Config:   "git:\n  mode: remote\n",
		Instance: instance,
	})
	c.stop(t)
	if !strings.Contains(c.logs(), "removing the instance marker of a daemon that is gone") {
		t.Errorf("takeover not logged:\n%s", c.logs())
	}
	if _, err := dockertest.Client(t).ContainerInspect(context.Background(), instancelock.MarkerName(instance)); !errdefs.IsNotFound(err) {
		t.Errorf("marker left after a clean stop: %v", err)
	}
}
