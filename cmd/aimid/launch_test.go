package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// daemonOpts says how launch starts a test's aimid. Only Sock and DataDir
// are required; the zero value of every other field is the common case.
type daemonOpts struct {
	Sock, DataDir string
	// Image, when set, gives the daemon the tests' sandbox settings for it
	// (memory, swap, CPUs, pids, stop grace: sandboxSettings, or
	// localSettings with Local) before Env. Without it the daemon gets Env
	// alone: a test that spells out its own settings.
	Image string
	// Scripts is written as agent.env in the daemon's config (the stand-in's
	// scripts), and the daemon runs in remote git mode.
	Scripts map[string]string
	// Local: the daemon's git service on (git.mode: local) and the demo
	// agent, with limits the real runner (git, agent subprocess, worktrees)
	// fits in, and none of the test process's AIMI_ settings.
	Local bool
	// Config, when set, is the daemon's config file instead of the one
	// Scripts or Local make.
	Config string
	// LogLevel defaults to info, or debug with Local (the leak checks of
	// those tests cover everything the daemon can log).
	LogLevel string
	// Base is the environment the daemon starts from; nil is the test
	// process's own (without its AIMI_ settings with Local).
	Base []string
	// Env is set last (tests run in parallel: none sets its own process's
	// environment).
	Env []string
	// Instance is the daemon's --instance; it defaults to testInstance(Sock).
	Instance string
	// Wrap, when not nil, changes the daemon's command before it starts
	// (running it under prlimit, or in a mount namespace of its own).
	Wrap func(*exec.Cmd)
}

// localConfig is the config of a Local daemon.
const localConfig = "agent:\n  kind: demo\ngit:\n  mode: local\n"

// sandboxSettings are the settings of a daemon of Image without Local: a
// stand-in's sandbox is small.
func sandboxSettings(image string) []string {
	return []string{
		"AIMI_SANDBOX_IMAGE=" + image,
		"AIMI_SANDBOX_MEMORY=128m",
		"AIMI_SANDBOX_SWAP=128m",
		"AIMI_SANDBOX_CPUS=0.5",
		"AIMI_SANDBOX_PIDS=64",
		"AIMI_SWARM_STOP_GRACE=2s",
		"AIMI_GIT_MODE=remote",
	}
}

// localSettings are the settings of a Local daemon of image.
func localSettings(image string) []string {
	return []string{
		"AIMI_SANDBOX_IMAGE=" + image,
		"AIMI_SANDBOX_MEMORY=512m",
		"AIMI_SANDBOX_SWAP=512m",
		"AIMI_SANDBOX_CPUS=1",
		"AIMI_SANDBOX_PIDS=256",
		"AIMI_SWARM_STOP_GRACE=2s",
	}
}

// scriptsConfig is a config whose agent.env is scripts.
func scriptsConfig(scripts map[string]string) string {
	var y strings.Builder
	y.WriteString("agent:\n  env:\n")
	for k, v := range scripts {
		fmt.Fprintf(&y, "    %s: %q\n", k, v)
	}
	return y.String()
}

// withDefaults fills in what o leaves to launch.
func (o daemonOpts) withDefaults() daemonOpts {
	if o.Config == "" {
		o.Config = scriptsConfig(o.Scripts)
		if o.Local {
			o.Config = localConfig
		}
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
		if o.Local {
			o.LogLevel = "debug"
		}
	}
	if o.Base == nil {
		o.Base = os.Environ()
		if o.Local {
			o.Base = localEnv()
		}
	}
	switch {
	case o.Image != "" && o.Local:
		o.Env = append(localSettings(o.Image), o.Env...)
	case o.Image != "":
		o.Env = append(sandboxSettings(o.Image), o.Env...)
	}
	if o.Instance == "" {
		// An instance per socket: this daemon adopts only its own test's
		// containers, never those of other tests running on the engine.
		o.Instance = testInstance(o.Sock)
	}
	return o
}

// testInstance is the --instance launch gives the daemon of sock.
func testInstance(sock string) string {
	return fmt.Sprintf("test-%x", sha256.Sum256([]byte(sock)))[:21]
}

// localEnv is the test process's environment without its AIMI_ settings.
func localEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	return env
}

// envDaemonLogs set (to anything) prints every test daemon's stderr when
// its test ends, passed or not: where a slow test's time went.
const envDaemonLogs = "AIMI_TEST_DAEMON_LOGS"

// launch starts the built aimid as o says and waits until it answers its
// health check. The test's cleanup kills it if it still runs, fails the
// test on a race report in its log, and prints the log when the test
// failed (or envDaemonLogs is set).
func launch(t testing.TB, o daemonOpts) *proc {
	t.Helper()
	dockertest.Client(t) // every daemon needs an engine: fail, or skip under AIMI_SKIP_DOCKER=1
	o = o.withDefaults()
	launched.Store(o.Instance, true)
	cfgDir := filepath.Join(o.DataDir, "cfg")
	os.MkdirAll(cfgDir, 0o755)
	cfgFile := filepath.Join(cfgDir, "config.yaml")
	os.WriteFile(cfgFile, []byte(o.Config), 0o644)
	cmd := exec.Command(aimidBinary(t), "--socket", o.Sock, "--data-dir", o.DataDir, "--config", cfgFile, "--log-level", o.LogLevel, "--instance", o.Instance)
	cmd.Env = append(append(append([]string(nil), o.Base...), "XDG_CONFIG_HOME="+cfgDir), o.Env...)
	if o.Wrap != nil {
		o.Wrap(cmd)
	}
	p := &proc{cmd: cmd, sock: o.Sock, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
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
		removeInstanceMarker(t, o.Instance, cmd.Process.Pid)
		if r := raceReport(p.logs()); r != "" {
			t.Errorf("the daemon raced (its race detector's report):\n%s", r)
		}
		if t.Failed() || os.Getenv(envDaemonLogs) != "" {
			t.Logf("aimid stderr:\n%s", p.logs())
		}
	})
	p.waitHealthy(t)
	return p
}

// waitHealthy waits until the daemon answers its health check, and fails
// the test at once when it exits before.
func (p *proc) waitHealthy(t testing.TB) {
	t.Helper()
	c := daemon.NewClient(p.sock)
	defer c.Close()
	testwait.Eventually(t, 60*time.Second, "aimid to answer its health check", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("aimid exited before it was ready: %v\n%s", err, p.logs())
		default:
		}
		return fmt.Errorf("%w\n%s", err, p.logs())
	}, testwait.Every(50*time.Millisecond))
}

// launchAimidWrapped is launch with positional options, for the tests not
// yet converted to daemonOpts.
func launchAimidWrapped(t testing.TB, wrap func(*exec.Cmd), instance, sock, dataDir, config, logLevel string, base []string, extra ...string) *proc {
	t.Helper()
	return launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Config: config, LogLevel: logLevel, Base: base, Env: extra, Instance: instance, Wrap: wrap})
}
