package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// warmTestRepo is a checkout without origin holding one-story task files
// names (local git mode).
func warmTestRepo(t testing.TB, names ...string) string {
	t.Helper()
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)
	return repo
}

// startWarmAimid is a Local daemon with a secret in agent.env (which the
// environment cannot set).
func startWarmAimid(t testing.TB, sock, dataDir, image, secret string, extraEnv ...string) *proc {
	t.Helper()
	cfg := "agent:\n  kind: demo\n  env:\n    WARM_SECRET: " + secret + "\ngit:\n  mode: local\n"
	return launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true, Config: cfg, Env: extraEnv})
}

// warmSandboxes lists the pool sandboxes of a daemon instance (waiting or
// claimed: the engine's labels do not change at a claim).
func warmSandboxes(t testing.TB, ctx context.Context, cli *client.Client, instance string) []dcontainer.InspectResponse {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"="+instance), filters.Arg("label", contract.LabelWarm+"="+contract.WarmLabelPool))
	cs, err := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var out []dcontainer.InspectResponse
	for _, c := range cs {
		if in, err := cli.ContainerInspect(ctx, c.ID); err == nil {
			out = append(out, in)
		}
	}
	return out
}

// waitingIn is the pool sandboxes still waiting for a claim: named as the
// pool names them, running, on no network.
func waitingIn(all []dcontainer.InspectResponse) []dcontainer.InspectResponse {
	var out []dcontainer.InspectResponse
	for _, in := range all {
		if strings.HasPrefix(in.Name, "/aimi-warm-") && in.State.Running {
			out = append(out, in)
		}
	}
	return out
}

// waitPool waits until n pool sandboxes of instance's sandbox image wait
// for a claim (those of a repository's workspace image, which the pool
// keeps for that repository alone after its start, are not counted).
func waitPool(t testing.TB, ctx context.Context, cli *client.Client, instance string, n int, p *proc) []dcontainer.InspectResponse {
	t.Helper()
	var w []dcontainer.InspectResponse
	testwait.Eventually(t, 3*time.Minute, fmt.Sprintf("%d pool sandboxes waiting", n), func() error {
		w = slices.DeleteFunc(waitingIn(warmSandboxes(t, ctx, cli, instance)), func(in dcontainer.InspectResponse) bool {
			return contract.IsWorkspaceImage(in.Config.Image)
		})
		if len(w) != n {
			return fmt.Errorf("%d waiting; daemon log:\n%s", len(w), p.logs())
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	return w
}

// checkReachesNothing: a waiting pool sandbox has a loopback only (no
// network endpoint at all), and no token, repository or secret.
func checkReachesNothing(t testing.TB, in dcontainer.InspectResponse, secret string) {
	t.Helper()
	if in.HostConfig.NetworkMode != "none" {
		t.Errorf("%s: network mode %q, want none", in.Name, in.HostConfig.NetworkMode)
	}
	for name, ep := range in.NetworkSettings.Networks {
		if name != "none" || ep.IPAddress != "" || ep.Gateway != "" {
			t.Errorf("%s: on network %s (%s via %s): a pool sandbox must reach nothing", in.Name, name, ep.IPAddress, ep.Gateway)
		}
	}
	for _, kv := range in.Config.Env {
		if strings.Contains(kv, secret) || strings.HasPrefix(kv, contract.EnvGitToken+"=") || strings.HasPrefix(kv, contract.EnvGitSSLCAInfo+"=") {
			t.Errorf("%s: environment holds %q before any claim", in.Name, strings.SplitN(kv, "=", 2)[0])
		}
	}
	checkEmptySocketDir(t, in)
}

// checkEmptySocketDir: a waiting pool sandbox has one mount of its own,
// its socket directory at contract.NetDir, and nothing in it (no service
// answers before a claim); besides it only the loopback's names that
// every sealed sandbox reads.
func checkEmptySocketDir(t testing.TB, in dcontainer.InspectResponse) {
	t.Helper()
	src := ""
	for _, m := range in.Mounts {
		switch {
		case m.Type == "bind" && m.Destination == contract.NetDir:
			src = m.Source
		case m.Type == "bind" && m.Destination == "/etc/hosts" && !m.RW && filepath.Base(m.Source) == aimid.SealedHostsFile:
		case m.Type == "bind":
			t.Errorf("%s: bind mount %s at %s before any claim", in.Name, m.Source, m.Destination)
		}
	}
	if src == "" {
		t.Errorf("%s: no socket directory mounted at %s", in.Name, contract.NetDir)
		return
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Errorf("%s: its socket directory: %v", in.Name, err)
	}
	for _, e := range ents {
		t.Errorf("%s: %s in its socket directory before any claim", in.Name, e.Name())
	}
}

// sameIsolation compares what isolates a sandbox: limits, capabilities,
// security options, root filesystem, runtime, the networks it is on.
func sameIsolation(t testing.TB, claimed, created dcontainer.InspectResponse) {
	t.Helper()
	type iso struct {
		CPUs, Mem, Swap int64
		Pids            int64
		CapAdd, CapDrop []string
		SecOpt          []string
		ReadOnly        bool
		Runtime, Image  string
		Networks        []string
		Sealed          bool
		LogType         string
		Mounts          []string
	}
	of := func(in dcontainer.InspectResponse) iso {
		h := in.HostConfig
		var pids int64
		if h.PidsLimit != nil {
			pids = *h.PidsLimit
		}
		var nets []string
		for n := range in.NetworkSettings.Networks {
			nets = append(nets, n)
		}
		slices.Sort(nets)
		// Where, not what: a claimed sandbox's socket directory is the
		// pool's, and its CA comes in the claim line, not as a mount.
		var mounts []string
		for _, m := range in.Mounts {
			if m.Type != "bind" || m.Destination == contract.NetDir {
				mounts = append(mounts, string(m.Type)+":"+m.Destination)
			}
		}
		slices.Sort(mounts)
		return iso{h.NanoCPUs, h.Memory, h.MemorySwap, pids, h.CapAdd, h.CapDrop, h.SecurityOpt, h.ReadonlyRootfs, h.Runtime, in.Image, nets, in.Config.NetworkDisabled, h.LogConfig.Type, mounts}
	}
	a, b := of(claimed), of(created)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("isolation differs:\nclaimed %s: %+v\ncreated %s: %+v", claimed.Name, a, created.Name, b)
	}
}

// TestWarmPoolClaimRefillAndIsolation: aimid with sandbox.warm_pool 2 keeps
// two sandboxes that reach nothing and hold no secret; a start of three task
// files claims both and creates the third; every container completes, the
// claimed ones isolated exactly as the created one, on their swarm's network
// under their task's name, with a warm note in their journal only; the pool
// refills to two; cleanup leaves the pool alone.
func TestWarmPoolClaimRefillAndIsolation(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+dockertest.RunID())))[:6]
	names := []string{"wa-" + sfx, "wb-" + sfx, "wc-" + sfx}
	repo := warmTestRepo(t, names...)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	const secret = "warm-secret-value-7f3a"
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	p := startWarmAimid(t, sock, filepath.Join(dir, "data"), image, secret, "AIMI_SANDBOX_WARM_POOL=2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)

	pool := waitPool(t, ctx, cli, instance, 2, p)
	poolIDs, poolDirs := map[string]bool{}, map[string]string{}
	for _, in := range pool {
		checkReachesNothing(t, in, secret)
		poolIDs[in.ID] = true
		poolDirs[in.ID] = filepath.Join(aimid.PoolSocketRoot(filepath.Join(dir, "data")), strings.TrimPrefix(in.Name, "/aimi-warm-"))
	}

	started := time.Now()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 5*time.Minute, "every container exited", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 3 && allExited(v)
	})
	sw := validState(t, repo)
	claimed, created := claimedAndCreated(t, ctx, cli, repo, sw, poolIDs)
	if len(claimed) != 2 || len(created) != 1 {
		t.Fatalf("%d claimed and %d created, want 2 and 1", len(claimed), len(created))
	}
	var volumes []string
	for _, in := range append(slices.Clone(claimed), created...) {
		volumes = append(volumes, workspaceVolume(t, in))
	}
	checkClaimedAsSealedAsCreated(t, claimed, created[0], v)

	refilled := waitPool(t, ctx, cli, instance, 2, p)
	checkRefillAfterWork(t, repo, sw, refilled, started)
	// A restarted daemon never served the finished claimed containers'
	// sockets; their removal takes the directories the pool mounted still.
	p.stop(t)
	p = startWarmAimid(t, sock, filepath.Join(dir, "data"), image, secret, "AIMI_SANDBOX_WARM_POOL=2")
	if code, out, errOut := aimi(ctx, "swarm", "cleanup", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	checkCleanupLeftNoneOfTheClaimed(t, ctx, cli, claimed, poolDirs, volumes)
	// The plain image's pool (the repository's workspace image, adopted
	// by the restarted daemon, keeps its own pool beside it).
	var after []dcontainer.InspectResponse
	for _, in := range waitingIn(warmSandboxes(t, ctx, cli, instance)) {
		if !contract.IsWorkspaceImage(in.Config.Image) {
			after = append(after, in)
		}
	}
	if len(after) != 2 || after[0].ID != refilled[0].ID && after[0].ID != refilled[1].ID {
		t.Errorf("cleanup touched the pool: %d waiting after it", len(after))
	}
	if strings.Contains(p.logs(), secret) {
		t.Error("the agent.env secret is in the daemon's log")
	}
	p.stop(t)
}

// claimedAndCreated checks each container of sw completed under its own
// name, with a warm note if and only if it was claimed from the pool (one
// of poolIDs), and a ready-made workspace; it returns the claimed ones and
// the created ones.
// checkClaimedAsSealedAsCreated checks each container claimed from the
// pool is isolated as the one created for the swarm, which is sealed
// (no network setup by the engine), and that no container of v reported
// an error: a claim must cost a task nothing of its isolation or its run.
func checkClaimedAsSealedAsCreated(t *testing.T, claimed []dcontainer.InspectResponse, created dcontainer.InspectResponse, v api.SwarmView) {
	t.Helper()
	for _, c := range claimed {
		sameIsolation(t, c, created)
	}
	if !created.Config.NetworkDisabled {
		t.Errorf("%s has the engine's network setup, want it sealed (networking disabled)", created.Name)
	}
	for _, d := range v.Containers {
		if len(d.Errors) != 0 {
			t.Errorf("%s: errors %+v", d.Name, d.Errors)
		}
	}
}

// checkCleanupLeftNoneOfTheClaimed checks the cleanup removed, with the
// claimed containers, the socket directories the pool had mounted in them
// (poolDirs, by container ID) and the workspace volumes: a claimed
// sandbox leaves nothing the created ones would not.
func checkCleanupLeftNoneOfTheClaimed(t *testing.T, ctx context.Context, cli *client.Client, claimed []dcontainer.InspectResponse, poolDirs map[string]string, volumes []string) {
	t.Helper()
	for _, c := range claimed {
		if _, err := os.Stat(poolDirs[c.ID]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the socket directory the pool mounted (%s) is left after its removal: %v", c.Name, poolDirs[c.ID], err)
		}
	}
	for _, v := range volumes {
		if _, err := cli.VolumeInspect(ctx, v); !errdefs.IsNotFound(err) {
			t.Errorf("workspace volume %s is left after the cleanup (%v)", v, err)
		}
	}
}

func claimedAndCreated(t *testing.T, ctx context.Context, cli *client.Client, repo string, sw *state.Swarm, poolIDs map[string]bool) (claimed, created []dcontainer.InspectResponse) {
	t.Helper()
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted {
			t.Errorf("%s: %s, want completed", c.ContainerName, c.Status)
		}
		in, err := cli.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		if in.Name != "/"+c.ContainerName {
			t.Errorf("container %s is named %s on the engine", c.ContainerName, in.Name)
		}
		warm := hasWarmNote(t, repo, sw.SwarmID, c.ContainerName)
		if poolIDs[c.ContainerID] {
			claimed = append(claimed, in)
		} else {
			created = append(created, in)
		}
		if warm != poolIDs[c.ContainerID] {
			t.Errorf("%s: warm note %v, claimed from the pool %v", c.ContainerName, warm, poolIDs[c.ContainerID])
		}
		if from := workspaceFrom(t, repo, sw.SwarmID, c.ContainerName); from != "from=ready-made" {
			t.Errorf("%s (claimed %v): the workspace came %q, want ready-made from the git service", c.ContainerName, poolIDs[c.ContainerID], from)
		}
	}
	return claimed, created
}

// workspaceVolume is the name of the volume on in's workspace: the
// sandbox's writable layer may be a filesystem in user space, and a
// ready-made workspace is unpacked there file by file.
func workspaceVolume(t testing.TB, in dcontainer.InspectResponse) string {
	t.Helper()
	for _, m := range in.Mounts {
		if m.Destination == contract.DefaultWorkspace {
			if m.Type != "volume" || m.Name == "" {
				t.Errorf("%s: %s is a %s mount, want a volume", in.Name, m.Destination, m.Type)
			}
			return m.Name
		}
	}
	t.Errorf("%s: no volume on %s (mounts %+v)", in.Name, contract.DefaultWorkspace, in.Mounts)
	return ""
}

// checkRefillAfterWork: the pool created none of refilled before every
// container of the start (at started) was working (its first
// in_progress): a refill competes with their clones and agents' starts for
// the engine and the cores. The pool waits 20 s at most (orchestrator's
// poolHold): a machine slower than that is only logged.
func checkRefillAfterWork(t testing.TB, repo string, sw *state.Swarm, refilled []dcontainer.InspectResponse, started time.Time) {
	t.Helper()
	var lastWork time.Time
	for _, at := range firstWork(t, repo, sw) {
		if at.After(lastWork) {
			lastWork = at
		}
	}
	if lastWork.Sub(started) > 20*time.Second {
		t.Logf("the last container worked %s after the start: past what the pool waits for, the refill is not checked", lastWork.Sub(started))
		return
	}
	for _, in := range refilled {
		created, err := time.Parse(time.RFC3339Nano, in.Created)
		if err != nil {
			t.Fatal(err)
		}
		if created.Before(lastWork) {
			t.Errorf("pool sandbox %s was created at %s, %s before the start's last container was working", in.Name, created.Format(time.RFC3339Nano), lastWork.Sub(created))
		}
	}
}

// hasWarmNote reports whether a container's journal notes a warm claim.
func hasWarmNote(t testing.TB, repo, swarmID, name string) bool {
	t.Helper()
	for _, r := range journalOf(t, repo, swarmID, name) {
		if r.Stream == state.StreamDaemon && strings.HasPrefix(r.Reason, "warm:") {
			return true
		}
	}
	return false
}

// workspaceFrom is the from= of the runner's "workspace ready" line in a
// container's journal ("" when there is none).
func workspaceFrom(t testing.TB, repo, swarmID, name string) string {
	t.Helper()
	for _, r := range journalOf(t, repo, swarmID, name) {
		if strings.Contains(r.Raw, `msg="workspace ready"`) {
			for _, f := range strings.Fields(r.Raw) {
				if strings.HasPrefix(f, "from=") {
					return f
				}
			}
		}
	}
	return ""
}

// journalOf reads a container's journal.
func journalOf(t testing.TB, repo, swarmID, name string) []state.Record {
	t.Helper()
	recs, err := state.ReadJournal(state.Open(repo).JournalPath(contract.Sandbox{Swarm: swarmID, Container: name}))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
