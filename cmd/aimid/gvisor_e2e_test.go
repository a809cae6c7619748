package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// gvisorRuntime is the name runsc is registered under in the test engine,
// with the arguments docs/gvisor.md gives: gVisor's own network mode fails
// on a container's network namespace ("cannot run with network enabled in
// root network namespace"), and without --host-uds=open a sandbox cannot
// connect to its sockets under /run/aimi/net ("operation not permitted").
// The other registrations are what fails: without --host-uds=open aimid
// refuses it, and gVisor's defaults start no container.
var gvisorRuntime = map[string]clustertest.Runtime{
	"runsc":         {Path: "/usr/bin/runsc", Args: []string{"--network=host", "--host-uds=open"}},
	"runsc-nouds":   {Path: "/usr/bin/runsc", Args: []string{"--network=host"}},
	"runsc-default": {Path: "/usr/bin/runsc"},
}

// gvisorEngine starts a Docker engine of the test's own (a container of
// the host engine, package clustertest) holding Debian's runsc, registered
// as the runtime "runsc", with image loaded and binds (the daemon's data
// directory: the sandboxes' sockets and CA) at the same paths. The host
// engine's configuration is not touched. It checks that runsc runs a
// container there, so a failure says whether gVisor or aimid broke.
func gvisorEngine(t testing.TB, image string, binds ...string) *clustertest.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := clustertest.StartEngine(ctx, clustertest.EngineOptions{
		Packages: []string{"runsc"},
		Runtimes: gvisorRuntime,
		// gVisor's ptrace platform traces its own stub processes.
		Capabilities: []string{"SYS_PTRACE"},
		Binds:        binds,
		Images:       []string{image},
	})
	if err != nil {
		t.Fatalf("start an engine with runsc: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		if err := c.Close(cctx); err != nil {
			t.Errorf("remove the runsc engine: %v", err)
		}
	})
	t.Logf("engine with runsc ready in %s", c.Took.Round(time.Second))
	if out, err := runOnce(ctx, c.Nodes[0].Client, image, "runsc", "uname", "-r"); err != nil || strings.TrimSpace(out) != "4.4.0" {
		t.Fatalf("runsc does not run a container on this engine (uname -r %q, want gVisor's 4.4.0): %v", out, err)
	}
	return c
}

// runOnce runs cmd in a new container of image under runtime with no
// network and returns its output.
func runOnce(ctx context.Context, cli *client.Client, image, runtime string, cmd ...string) (string, error) {
	return runOn(ctx, cli, image, runtime, "none", cmd...)
}

// runOn is runOnce on the network netMode.
func runOn(ctx context.Context, cli *client.Client, image, runtime, netMode string, cmd ...string) (string, error) {
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: cmd[:1], Cmd: cmd[1:]},
		&container.HostConfig{Runtime: runtime, NetworkMode: container.NetworkMode(netMode)}, nil, nil, "")
	if err != nil {
		return "", err
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return "", err
	}
	waitC, errC := cli.ContainerWait(ctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case err := <-errC:
		return "", err
	case w := <-waitC:
		if w.StatusCode != 0 {
			return "", fmt.Errorf("exit %d", w.StatusCode)
		}
	}
	rc, err := cli.ContainerLogs(ctx, resp.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var b strings.Builder
	if _, err := stdcopy.StdCopy(&b, io.Discard, rc); err != nil {
		return "", err
	}
	return b.String(), nil
}

// gvisorSettings are the daemon's settings for sandboxes under runsc on
// engine c (runtime "" leaves the engine's default).
func gvisorSettings(c *clustertest.Cluster, image, runtime string) []string {
	s := []string{
		"AIMI_ENGINE_HOST=" + c.Nodes[0].Host,
		"AIMI_SANDBOX_IMAGE=" + image,
		"AIMI_SANDBOX_MEMORY=512m",
		"AIMI_SANDBOX_SWAP=512m",
		"AIMI_SANDBOX_CPUS=1",
		"AIMI_SANDBOX_PIDS=256",
		"AIMI_SWARM_STOP_GRACE=2s",
	}
	if runtime != "" {
		s = append(s, "AIMI_SANDBOX_RUNTIME="+runtime, "AIMI_SANDBOX_REQUIRE_RUNTIME=true")
	}
	return s
}

// TestGVisorRuntimeRunsTheDemoSwarm: with sandbox.runtime: runsc (and
// require_runtime) on an engine that has Debian's runsc registered, the
// real daemon in local git mode runs a linear and a diamond task file on
// the demo agent to completed: every sandbox was created with the runsc
// runtime and no network, cloned and pushed through its sockets under
// /run/aimi/net (unix sockets across gVisor's gofer), and each branch is
// published into the checkout with one commit per story. On that engine
// gVisor's own network mode starts no container, and --network=host keeps
// a container in its own network namespace. A registration
// of runsc without --host-uds=open stops aimid at start, saying what to add.
func TestGVisorRuntimeRunsTheDemoSwarm(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("starts a Docker engine in a container and runs sandboxes under gVisor")
	}
	started := time.Now()
	image := sandboxImage(t)
	dir := shortDir(t)
	c := gvisorEngine(t, image, dir)
	node := c.Nodes[0].Client

	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	files := map[string]string{"linear-" + sfx: localLinearTasks, "diamond-" + sfx: localDiamondTasks}
	stories := map[string]int{"aimi-linear-" + sfx: 3, "aimi-diamond-" + sfx: 4}
	branches := map[string]string{"aimi-linear-" + sfx: "feat/linear", "aimi-diamond-" + sfx: "feat/diamond"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	base := gitOut(t, repo, "rev-parse", "HEAD")

	checkRunscNetwork(t, c, image)
	refusedAtStart(t, dir, gvisorSettings(c, image, "runsc-nouds"), "--host-uds=open")
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  kind: demo\ngit:\n  mode: local\n",
		Base:    cleanEnv(),
		Env:     gvisorSettings(c, image, "runsc"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start --all --local: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, 6*time.Minute, "every container exited", func(v api.SwarmView) bool {
		return len(v.Containers) == 2 && allExited(v)
	})
	for _, d := range view.Containers {
		if d.ExitCode == nil || *d.ExitCode != 0 || len(d.Errors) != 0 {
			t.Errorf("%s: exit %v errors %+v", d.Name, d.ExitCode, d.Errors)
		}
	}
	sw := validState(t, repo)
	for _, sc := range sw.Containers {
		want := state.Progress{Total: stories[sc.ContainerName], Completed: stories[sc.ContainerName]}
		if sc.Status != state.StatusCompleted || sc.StoryProgress != want {
			t.Errorf("%s: %s %+v, want completed %+v", sc.ContainerName, sc.Status, sc.StoryProgress, want)
		}
		checkGVisorSandbox(t, ctx, node, sc)
	}
	waitBranchesPublished(t, repo, slices.Collect(maps.Values(branches)), time.Minute, p)
	for name, b := range branches {
		if got := gitOut(t, repo, "rev-list", "--count", base+".."+b); got != strconv.Itoa(stories[name]) {
			t.Errorf("%s: %s commits on top of the base, want %d", b, got, stories[name])
		}
	}
	if code, out, errOut := run("swarm", "cleanup"); code != 0 {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	checkGVisorWorkspaceImage(t, ctx, node, repo, run, p)
	p.stop(t)
	t.Logf("total %s", time.Since(started).Round(time.Second))
}

// checkGVisorWorkspaceImage: the repository's workspace image, built on
// the runsc engine after the first start, serves the next start's
// sandbox under gVisor, which applies the moved tip's difference to it.
func checkGVisorWorkspaceImage(t *testing.T, ctx context.Context, node *client.Client, repo string, run func(args ...string) (int, string, string), p *proc) {
	t.Helper()
	testwait.Eventually(t, 3*time.Minute, "the workspace image built on the runsc engine", func() error {
		if !strings.Contains(p.logs(), "workspace image built") {
			return fmt.Errorf("daemon log:\n%s", p.logs())
		}
		return nil
	})
	name := "again-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	addTaskFiles(t, repo, name)
	if code, out, errOut := run("swarm", "start", "--force", "--follow", "--local", "--file", ".aimi/tasks/"+name+"-tasks.json"); code != 0 {
		t.Fatalf("the start on the workspace image: exit %d\n%s\n%s\ndaemon log:\n%s", code, out, errOut, p.logs())
	}
	sw := validState(t, repo)
	for _, sc := range sw.Containers {
		if sc.Status != state.StatusCompleted {
			t.Errorf("%s: %s on the workspace image under gVisor", sc.ContainerName, sc.Status)
		}
		if from := workspaceFrom(t, repo, sw.SwarmID, sc.ContainerName); from != "from=image+delta" {
			t.Errorf("%s: workspace %q under gVisor, want from=image+delta", sc.ContainerName, from)
		}
		checkGVisorSandbox(t, ctx, node, sc)
		if in, err := node.ContainerInspect(ctx, sc.ContainerID); err != nil || !contract.IsWorkspaceImage(in.Config.Image) {
			t.Errorf("%s: not created from a workspace image (%v)", sc.ContainerName, err)
		}
	}
}

// checkRunscNetwork: with gVisor's own network mode no container starts
// here, and with --network=host a container on the engine's bridge is
// still in its own network namespace: its default route goes to the
// bridge's subnet, not to the engine's own gateway (the node's network).
func checkRunscNetwork(t *testing.T, c *clustertest.Cluster, image string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := c.Nodes[0].Client
	if _, err := runOn(ctx, node, image, "runsc-default", "bridge", "true"); err == nil || !strings.Contains(err.Error(), "cannot run with network enabled in root network namespace") {
		t.Errorf("runsc with its own network mode: %v, want the root network namespace refusal", err)
	}
	br, err := node.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil || len(br.IPAM.Config) == 0 {
		t.Fatalf("the engine's bridge: %v", err)
	}
	routes, err := runOn(ctx, node, image, "runsc", "bridge", "cat", "/proc/net/route")
	if err != nil {
		t.Fatalf("runsc --network=host on the bridge: %v", err)
	}
	gw := defaultGateway(routes)
	_, subnet, err := net.ParseCIDR(br.IPAM.Config[0].Subnet)
	if err != nil || gw == c.Gateway || !subnet.Contains(net.ParseIP(gw)) {
		t.Errorf("runsc --network=host on the bridge: default gateway %q, want one in the bridge's %s (the engine's own is %s); routes:\n%s", gw, br.IPAM.Config[0].Subnet, c.Gateway, routes)
	}
}

// defaultGateway is the gateway of the default route in /proc/net/route's
// text ("" when there is none).
func defaultGateway(routes string) string {
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil {
			continue
		}
		return fmt.Sprintf("%d.%d.%d.%d", v&0xff, v>>8&0xff, v>>16&0xff, v>>24)
	}
	return ""
}

// refusedAtStart runs aimid with settings in its own socket and data
// directory under dir and wants it to exit at start with an error saying
// want.
func refusedAtStart(t *testing.T, dir string, settings []string, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sock, data := filepath.Join(dir, "refused.sock"), filepath.Join(dir, "refused")
	cfg := filepath.Join(dir, "refused.yaml")
	os.WriteFile(cfg, []byte("agent:\n  kind: demo\ngit:\n  mode: local\n"), 0o644)
	cmd := exec.CommandContext(ctx, aimidBinary(t), "--socket", sock, "--data-dir", data, "--config", cfg, "--instance", testInstance(sock))
	cmd.Env = append(append(cleanEnv(), "XDG_CONFIG_HOME="+data), settings...)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
		t.Fatalf("aimid with %v: %v, want an exit at start saying %q:\n%s", settings, err, want, out)
	}
	t.Logf("refused at start: %s", lastLine(string(out)))
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// checkGVisorSandbox: sc's container on the engine was created with
// the runsc runtime, no network and its socket directory at /run/aimi/net.
func checkGVisorSandbox(t *testing.T, ctx context.Context, node *client.Client, sc *state.Container) {
	t.Helper()
	in, err := node.ContainerInspect(ctx, sc.ContainerID)
	if err != nil {
		t.Fatalf("container of %s on the runsc engine: %v", sc.ContainerName, err)
	}
	if in.HostConfig.Runtime != "runsc" || in.HostConfig.NetworkMode != "none" {
		t.Errorf("%s: runtime %q network %q, want runsc and none", sc.ContainerName, in.HostConfig.Runtime, in.HostConfig.NetworkMode)
	}
	found := false
	for _, m := range in.Mounts {
		found = found || m.Destination == contract.NetDir
	}
	if !found {
		t.Errorf("%s: no mount at %s: %+v", sc.ContainerName, contract.NetDir, in.Mounts)
	}
}
