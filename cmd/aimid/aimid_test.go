package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/spec"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

var (
	buildOnce sync.Once
	aimidBin  string
	buildErr  error
)

// aimidBinary builds cmd/aimid once per test run.
func aimidBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aimid-bin")
		if err != nil {
			buildErr = err
			return
		}
		aimidBin = filepath.Join(dir, "aimid")
		out, err := exec.Command("go", "build", "-o", aimidBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return aimidBin
}

// TestMain runs the tests with defaultParallel and removes what they
// shared: the built binary, the images, the cluster.
func TestMain(m *testing.M) {
	raiseParallel()
	code := m.Run()
	closeCluster()
	removeImages()
	if aimidBin != "" {
		os.RemoveAll(filepath.Dir(aimidBin))
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
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", "https://example.com/org/repo.git"}} {
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
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dockertest.CleanupByLabel(ctx, contract.LabelProject, repo); err != nil {
			t.Errorf("cleanup containers of %s: %v", repo, err)
		}
	})
}

// proc is a running aimid.
type proc struct {
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer // read it after the daemon exited, or via logs
	log    *lockedWriter
	done   chan error
}

// logs is the daemon's stderr so far, safe to read while it runs.
func (p *proc) logs() string {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return p.stderr.String()
}

// startAimid runs the built daemon with its own socket, data dir and user
// config (scripts is written as agent.env: the stand-in's scripts).
func startAimid(t testing.TB, sock, dataDir, image string, scripts map[string]string) *proc {
	t.Helper()
	return startAimidEnv(t, sock, dataDir, image, scripts)
}

// startAimidEnv is startAimid with extra environment settings for the
// daemon (tests run in parallel: none sets its own process's environment).
func startAimidEnv(t testing.TB, sock, dataDir, image string, scripts map[string]string, extraEnv ...string) *proc {
	t.Helper()
	var y strings.Builder
	y.WriteString("agent:\n  env:\n")
	for k, v := range scripts {
		fmt.Fprintf(&y, "    %s: %q\n", k, v)
	}
	settings := []string{
		"AIMI_SANDBOX_IMAGE=" + image,
		"AIMI_SANDBOX_MEMORY=128m",
		"AIMI_SANDBOX_SWAP=128m",
		"AIMI_SANDBOX_CPUS=0.5",
		"AIMI_SANDBOX_PIDS=64",
		"AIMI_SWARM_STOP_GRACE=2s",
		"AIMI_GIT_MODE=remote",
	}
	return launchAimid(t, sock, dataDir, y.String(), "info", os.Environ(), append(settings, extraEnv...)...)
}

// launchAimid starts the built aimid with config as its config file, base
// plus extra as its environment, and waits until it answers its health
// check; the test's cleanup kills it if it still runs.
func launchAimid(t testing.TB, sock, dataDir, config, logLevel string, base []string, extra ...string) *proc {
	t.Helper()
	// An instance per socket: this daemon adopts only its own test's
	// containers, never those of other tests running on the engine.
	return launchAimidWrapped(t, nil, testInstance(sock), sock, dataDir, config, logLevel, base, extra...)
}

// testInstance is the --instance launchAimid gives the daemon of sock.
func testInstance(sock string) string {
	return fmt.Sprintf("test-%x", sha256.Sum256([]byte(sock)))[:21]
}

// launchAimidAs is launchAimid with the daemon's --instance.
func launchAimidAs(t testing.TB, instance, sock, dataDir, config, logLevel string, base []string, extra ...string) *proc {
	t.Helper()
	return launchAimidWrapped(t, nil, instance, sock, dataDir, config, logLevel, base, extra...)
}

// launchAimidWrapped is launchAimidAs with wrap, when not nil, changing the
// daemon's command before it starts (running it under prlimit).
func launchAimidWrapped(t testing.TB, wrap func(*exec.Cmd), instance, sock, dataDir, config, logLevel string, base []string, extra ...string) *proc {
	t.Helper()
	cfgDir := filepath.Join(dataDir, "cfg")
	os.MkdirAll(cfgDir, 0o755)
	cfgFile := filepath.Join(cfgDir, "config.yaml")
	os.WriteFile(cfgFile, []byte(config), 0o644)
	cmd := exec.Command(aimidBinary(t), "--socket", sock, "--data-dir", dataDir, "--config", cfgFile, "--log-level", logLevel, "--instance", instance)
	cmd.Env = append(append(append([]string(nil), base...), "XDG_CONFIG_HOME="+cfgDir), extra...)
	if wrap != nil {
		wrap(cmd)
	}
	p := &proc{cmd: cmd, sock: sock, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	p.log = &lockedWriter{w: p.stderr}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited, not cmd.ProcessState: reading that races with Wait.
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(exited)
		p.done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		removeInstanceMarker(t, instance, cmd.Process.Pid)
		if t.Failed() {
			t.Logf("aimid stderr:\n%s", p.logs())
		}
	})
	c := daemon.NewClient(sock)
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("aimid exited before it was ready: %v\n%s", err, p.logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("aimid not ready: %v\n%s", err, p.logs())
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stop ends the daemon with SIGTERM, as systemd does, and fails the test
// unless it exits cleanly.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Errorf("aimid exit: %v", err)
	}
}

func (p *proc) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("aimid did not exit")
		return nil
	}
}

func aimi(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// recordingAimi returns a runner of aimi commands against repo and the
// daemon at sock, and the list of every answer (stdout, stderr) it gave,
// for the leak checks.
func recordingAimi(ctx context.Context, repo, sock string) (run func(args ...string) (int, string, string), answers *[]string) {
	answers = &[]string{}
	run = func(args ...string) (int, string, string) {
		code, out, errOut := aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
		*answers = append(*answers, out, errOut)
		return code, out, errOut
	}
	return run, answers
}

// allExited: every container is terminal and its process has exited (a
// container is terminal by its completion a moment before its process exits
// and acpPid goes null).
func allExited(v api.SwarmView) bool {
	for _, c := range v.State.Containers {
		if !c.Status.Terminal() {
			return false
		}
	}
	for _, d := range v.Containers {
		if d.ExitCode == nil {
			return false
		}
	}
	return true
}

// validState reads the repo's state file and validates it against the
// schema (spec/swarm-state.schema.json).
func validState(t testing.TB, repo string) *state.Swarm {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".aimi", "swarm-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.ValidateState(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	sw, err := state.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

func TestOrchestratorConfigCarriesEveryKey(t *testing.T) {
	parallel(t)
	c, err := configs.Load(configs.LoadOptions{UserConfigPath: "-", LookupEnv: func(k string) (string, bool) {
		v, ok := map[string]string{
			"AIMI_AGENT_KIND": "acp", "AIMI_AGENT_COMMAND": "claude-code-acp", "AIMI_AGENT_VERIFY_COMMAND": "make test",
			"AIMI_SANDBOX_RUNTIME": "sysbox-runc", "AIMI_SANDBOX_REQUIRE_RUNTIME": "true", "AIMI_SANDBOX_DISK": "10g",
		}[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.Agent.Env = configs.Secrets{"ANTHROPIC_API_KEY": "sk-secret", "MY_TOKEN": "tok-secret"}
	c.Task.EnvVars = map[string]string{"NODE_ENV": "test"}
	oc := orchestratorConfig(c, nil, nil)
	if oc.Git != nil {
		t.Error("remote mode must leave Git a nil interface")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", oc.Image, "aimi-sandbox:latest"},
		{"max", oc.MaxContainers, 4},
		{"cpus", oc.CPUs, 2.0},
		{"memory", oc.MemoryBytes, int64(4 << 30)},
		{"swap is memory+swap total", oc.MemorySwapBytes, int64(8 << 30)},
		{"pids", oc.PidsLimit, int64(512)},
		{"disk", oc.DiskBytes, int64(10 << 30)},
		{"timeout", oc.Timeout, 2 * time.Hour},
		{"grace", oc.StopGrace, 30 * time.Second},
		{"runtime", oc.Runtime, "sysbox-runc"},
		{"require runtime", oc.RequireRuntime, true},
		{"task env", oc.EnvVars["NODE_ENV"], "test"},
		{"agent kind", oc.RunnerEnv[contract.EnvAgent], "acp"},
		{"agent command", oc.RunnerEnv[contract.EnvAgentCommand], "claude-code-acp"},
		{"verify", oc.RunnerEnv[contract.EnvVerifyCommand], "make test"},
		{"policy", oc.RunnerEnv[contract.EnvPermissionPolicy], "allow"},
		{"handshake timeout", oc.RunnerEnv[contract.EnvHandshakeTimeout], "2m0s"},
		{"stall timeout", oc.RunnerEnv[contract.EnvStallTimeout], "15m0s"},
		{"loop limit", oc.RunnerEnv[contract.EnvLoopLimit], "8"},
		{"agent env secret goes to the runner env", oc.RunnerEnv["MY_TOKEN"], "tok-secret"},
		{"a model key stays with the model gateway", oc.RunnerEnv["ANTHROPIC_API_KEY"], ""},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
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
		// The test machine's engine is not in a swarm.
		{"swarm backend on an engine outside a swarm says how to fix it", []string{"--engine-backend", "swarm", "--git-mode", "remote"}, 1,
			"is not part of a swarm (state \"inactive\"): point engine.host at a Swarm mode manager, run 'docker swarm init' there, or set engine.backend to docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			dir := shortDir(t)
			args := append([]string{"--socket", filepath.Join(dir, "s.sock"), "--data-dir", filepath.Join(dir, "data"), "--config", "-"}, tt.args...)
			code := run(context.Background(), args, &stderr, nil)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
		})
	}
}

func TestSecondDaemonOnALiveSocketRefusesAndSIGTERMCleansUp(t *testing.T) {
	parallel(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "run", "aimid.sock")
	p := startAimid(t, sock, filepath.Join(dir, "data"), "aimi-sandbox:latest", nil)

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

func TestSwarmStartFollowEndToEnd(t *testing.T) {
	parallel(t)
	const secret = "sk-ant-e2e-secret-value"
	image := standinImage(t)
	repo := gitRepo(t, 3, "alpha", "beta", "gamma")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := startAimid(t, sock, filepath.Join(dir, "data"), image, map[string]string{
		"STANDIN_SCRIPT":                   "pace|30ms;auto|3",
		"STANDIN_SCRIPT__GAMMA_TASKS_JSON": "pace|30ms;progress|US-001|in_progress|starting;progress|US-001|failed|tests fail;complete|failed|-",
		// A secret in the runner env (not a model key: those stay in the
		// daemon) must surface nowhere.
		"SERVICE_TOKEN": secret,
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
	if strings.Contains(p.logs(), secret) {
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

// waitFor polls the daemon's status until cond holds.
func waitFor(t testing.TB, sock, repo string, d time.Duration, what string, cond func(api.SwarmView) bool) api.SwarmView {
	t.Helper()
	c := daemon.NewClient(sock)
	defer c.Close()
	deadline := time.Now().Add(d)
	var last api.SwarmView
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := c.Status(ctx, repo)
		cancel()
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := json.Marshal(last)
	t.Fatalf("timed out waiting for %s: %v\n%s", what, lastErr, b)
	return last
}

// TestDaemonDeathMidSwarmThenRestartLosesNothing stops the daemon mid-swarm
// (kill -9, and a clean SIGTERM) with containers still emitting and one
// finishing while no daemon runs, starts it again, and checks that every
// container was re-attached and every line journaled exactly once, in order.
func TestDaemonDeathMidSwarmThenRestartLosesNothing(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	for _, tt := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"kill -9", syscall.SIGKILL},
		{"SIGTERM", syscall.SIGTERM},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dieAndRecover(t, image, tt.sig)
		})
	}
}

func dieAndRecover(t *testing.T, image string, sig syscall.Signal) {
	repo := gitRepo(t, 4, "slow1", "slow2", "quick")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	scripts := map[string]string{
		// 4 stories, 9 messages at 3s: about 27s, so the stop lands mid-run
		// even on a loaded engine that starts containers seconds apart.
		"STANDIN_SCRIPT": "pace|3s;auto|4",
		// quick finishes while the daemon is down (the test waits for it).
		"STANDIN_SCRIPT__QUICK_TASKS_JSON": "progress|US-001|in_progress|go;sleep|12s;pace|10ms;progress|US-001|completed|a;progress|US-002|in_progress|b;progress|US-002|completed|c;progress|US-003|in_progress|d;progress|US-003|completed|e;progress|US-004|in_progress|f;progress|US-004|completed|g;complete|completed|-",
	}
	p := startAimid(t, sock, filepath.Join(dir, "data"), image, scripts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", repo, "--socket", sock)
	if code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	var quickID string
	var quickRunning bool
	var slowIDs []string
	waitFor(t, sock, repo, 2*time.Minute, "the slow containers running with progress", func(v api.SwarmView) bool {
		slowIDs = slowIDs[:0]
		for _, c := range v.State.Containers {
			if c.TaskFilePath == taskPath("quick") {
				quickID, quickRunning = c.ContainerID, c.Status == state.StatusRunning
				continue
			}
			slowIDs = append(slowIDs, c.ContainerID)
			if c.Status != state.StatusRunning || c.StoryProgress.Pending == c.StoryProgress.Total {
				return false
			}
		}
		return len(v.State.Containers) == 3
	})
	p.cmd.Process.Signal(sig)
	err := p.wait(t)
	_, statErr := os.Stat(sock)
	if sig == syscall.SIGKILL && statErr != nil {
		t.Fatalf("a killed daemon should leave its socket behind: %v", statErr)
	}
	if sig == syscall.SIGTERM {
		if err != nil {
			t.Fatalf("SIGTERM: aimid exit %v\n%s", err, p.logs())
		}
		if !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("SIGTERM left the socket: %v", statErr)
		}
	}
	eng := dockertest.Client(t)
	for _, id := range slowIDs {
		if info, err := eng.ContainerInspect(ctx, id); err != nil || !info.State.Running {
			t.Fatalf("container %s did not outlive the daemon: %v", id, err)
		}
	}
	// The slow containers go on emitting; quick exits while nobody watches
	// (on an engine so loaded that quick was done before the slow ones
	// had progress, that case is not exercised this time).
	if !quickRunning {
		t.Log("quick finished before the daemon went down")
	}
	deadline := time.Now().Add(time.Minute)
	for quickRunning {
		info, err := eng.ContainerInspect(ctx, quickID)
		if err != nil {
			t.Fatal(err)
		}
		if !info.State.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("quick did not finish while the daemon was down")
		}
		time.Sleep(200 * time.Millisecond)
	}

	p2 := startAimid(t, sock, filepath.Join(dir, "data"), image, scripts)
	waitFor(t, sock, repo, 2*time.Minute, "every container terminal and exited", allExited)
	// A clean stop flushes: the state file is final after it.
	p2.stop(t)
	sw := validState(t, repo)
	if len(sw.Containers) != 3 {
		t.Fatalf("%d containers", len(sw.Containers))
	}
	checkExactJournals(t, repo, sw, 4)
}

// checkExactJournals checks that every container completed its stories and
// that its journal holds what an uninterrupted run journals (each story
// in_progress then completed, then one completion), every line once.
func checkExactJournals(t *testing.T, repo string, sw *state.Swarm, stories int) {
	t.Helper()
	// What an uninterrupted run journals: each story in_progress then
	// completed, then one completion.
	var want []string
	for i := 1; i <= stories; i++ {
		want = append(want, fmt.Sprintf("US-%03d:in_progress", i), fmt.Sprintf("US-%03d:completed", i))
	}
	want = append(want, "completion:completed")
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress.Completed != stories || c.StoryProgress.Total != stories || c.ACPPID != nil {
			t.Errorf("%s: %s %+v acpPid=%v", c.ContainerName, c.Status, c.StoryProgress, c.ACPPID)
		}
		recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		cursors := map[string]bool{}
		for _, r := range recs {
			if r.Stream == "daemon" {
				continue
			}
			key := r.Stream + " " + r.Cursor.String()
			if cursors[key] {
				t.Errorf("%s: %s cursor %s journaled twice", c.ContainerName, r.Stream, r.Cursor)
			}
			cursors[key] = true
			var m struct {
				Type    string `json:"type"`
				Payload struct {
					StoryID string `json:"storyId"`
					Status  string `json:"status"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(r.Message, &m); err != nil || !r.Valid {
				t.Errorf("%s: record %d: valid=%v %v", c.ContainerName, r.Seq, r.Valid, err)
			}
			if m.Type == "completion" {
				got = append(got, "completion:"+m.Payload.Status)
			} else {
				got = append(got, m.Payload.StoryID+":"+m.Payload.Status)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s journal:\n%s\nwant\n%s", c.ContainerName, strings.Join(got, " "), strings.Join(want, " "))
			for _, r := range recs {
				t.Logf("  seq=%d cursor=%s time=%s stream=%s type=%s", r.Seq, r.Cursor, r.Time.Format("15:04:05.000"), r.Stream, r.Type)
			}
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
	p := startAimid(t, sock, filepath.Join(dir, "data"), image, map[string]string{"STANDIN_SCRIPT": "trap;progress|US-001|in_progress|working;sleep|5m"})
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

// TestKill9WithQueuedContainersStartsThemAfterRestart kills the daemon while
// one container runs and the others wait as pending (--max 1): the restarted
// daemon re-attaches the running one and starts the queued ones, one at a
// time, and every journal is exact.
func TestKill9WithQueuedContainersStartsThemAfterRestart(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 2, "first", "second", "third")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	scripts := map[string]string{"STANDIN_SCRIPT": "pace|1s;auto|2"}
	p := startAimid(t, sock, filepath.Join(dir, "data"), image, scripts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--max", "1", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(t, sock, repo, 2*time.Minute, "one running with progress, two pending", func(v api.SwarmView) bool {
		running, pending := 0, 0
		for _, c := range v.State.Containers {
			switch {
			case c.Status == state.StatusRunning && c.StoryProgress.Pending < c.StoryProgress.Total:
				running++
			case c.Status == state.StatusPending:
				pending++
			}
		}
		return running == 1 && pending == 2
	})
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)

	p2 := startAimid(t, sock, filepath.Join(dir, "data"), image, scripts)
	maxRunning := 0
	waitFor(t, sock, repo, 2*time.Minute, "every container terminal and exited", func(v api.SwarmView) bool {
		running := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning {
				running++
			}
		}
		maxRunning = max(maxRunning, running)
		return allExited(v)
	})
	if maxRunning > 1 {
		t.Errorf("%d containers ran at once after the restart; --max was 1", maxRunning)
	}
	p2.stop(t)
	sw := validState(t, repo)
	if len(sw.Containers) != 3 {
		t.Fatalf("%d containers", len(sw.Containers))
	}
	checkExactJournals(t, repo, sw, 2)
}

// removeInstanceMarker removes the instance marker a killed daemon (pid)
// left on the engine; a marker of any other process stays.
func removeInstanceMarker(t testing.TB, instance string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := dockertest.Client(t)
	insp, err := cli.ContainerInspect(ctx, instancelock.MarkerName(instance))
	if err != nil || insp.Config == nil || insp.Config.Labels[instancelock.LabelInstance] != instance || insp.Config.Labels[contract.LabelInstanceLockPID] != strconv.Itoa(pid) {
		return
	}
	if err := cli.ContainerRemove(ctx, insp.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		t.Errorf("remove the instance marker of killed aimid %d: %v", pid, err)
	}
}

func TestSecondDaemonOfAnInstanceOnOneEngineRefusesNamingTheFirst(t *testing.T) {
	parallel(t)
	dir := shortDir(t)
	instance := "test-two-" + dockertest.RunID()
	sockA, dataA := filepath.Join(dir, "a", "aimid.sock"), filepath.Join(dir, "a-data")
	a := launchAimidAs(t, instance, sockA, dataA, "git:\n  mode: remote\n", "info", os.Environ())

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
	b := launchAimidAs(t, instance, sockB, dataB, "git:\n  mode: remote\n", "info", os.Environ())

	// A killed daemon's marker is stale: the next daemon takes over.
	b.cmd.Process.Kill()
	b.wait(t)
	c := launchAimidAs(t, instance, filepath.Join(dir, "c", "aimid.sock"), filepath.Join(dir, "c-data"), "git:\n  mode: remote\n", "info", os.Environ())
	c.stop(t)
	if !strings.Contains(c.logs(), "removing the instance marker of a daemon that is gone") {
		t.Errorf("takeover not logged:\n%s", c.logs())
	}
	if _, err := dockertest.Client(t).ContainerInspect(context.Background(), instancelock.MarkerName(instance)); !errdefs.IsNotFound(err) {
		t.Errorf("marker left after a clean stop: %v", err)
	}
}

// taskPath is the state file's path of gitRepo's task file name. Tests
// find containers by it: packages run in parallel, so a container name
// such as aimi-first may be held by another test and get a suffix.
func taskPath(name string) string { return ".aimi/tasks/" + name + "-tasks.json" }

// containerOf is sw's container of gitRepo's task file name; the test
// fails when there is none (a nil would panic the whole parallel run).
func containerOf(t testing.TB, sw *state.Swarm, name string) *state.Container {
	t.Helper()
	c := sw.ContainerForTask(taskPath(name))
	if c == nil {
		t.Fatalf("no container of %s in the state: %+v", taskPath(name), sw.Containers)
	}
	return c
}
