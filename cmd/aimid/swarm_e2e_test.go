package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/swarmmode"
)

// The package's Swarm mode cluster: started by the first test that needs
// it, removed by TestMain after the last test. The tests on it run in
// parallel and share it (clusterUse); a test that stops one of its nodes
// has it to itself (clusterAlone). Each image is loaded into the nodes once.
var (
	clusterOnce   sync.Once
	sharedCluster *clustertest.Cluster
	clusterErr    error
	clusterUse    sync.RWMutex

	clusterImagesMu sync.Mutex
	clusterImages   = map[string]*imageLoad{}
)

// imageLoad is the load of one image into the cluster's nodes.
type imageLoad struct {
	once sync.Once
	err  error
}

// testCluster returns the shared three-node cluster with images loaded
// into every node, shared with the other tests until t ends.
func testCluster(t testing.TB, images ...string) *clustertest.Cluster {
	t.Helper()
	return useCluster(t, false, images)
}

// testClusterAlone is testCluster for a test that changes the cluster
// (stops a node): no other test uses it until t ends.
func testClusterAlone(t testing.TB, images ...string) *clustertest.Cluster {
	t.Helper()
	return useCluster(t, true, images)
}

func useCluster(t testing.TB, alone bool, images []string) *clustertest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node Swarm mode cluster of containers")
	}
	dockertest.Client(t) // skips under AIMI_SKIP_DOCKER=1
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		sharedCluster, clusterErr = clustertest.Start(ctx, clustertest.Options{})
	})
	if clusterErr != nil {
		t.Fatalf("start the test cluster: %v", clusterErr)
	}
	// Taken before the images load too: a node stopped under a load
	// breaks it. Registered before the test's own cleanups, so released
	// after them (its daemon, containers and services are gone by then).
	if alone {
		clusterUse.Lock()
		t.Cleanup(clusterUse.Unlock)
		// A test alone on the cluster looks at where its tasks run: a
		// node the tests before left Down (a restart still rejoining, a
		// load) would get none (a full run saw all three on the manager).
		ctx, cancel := context.WithTimeout(context.Background(), clusterWork)
		defer cancel()
		if err := sharedCluster.WaitNodesReady(ctx, clusterWork); err != nil {
			t.Fatal(err)
		}
	} else {
		clusterUse.RLock()
		t.Cleanup(clusterUse.RUnlock)
	}
	for _, img := range images {
		clusterImagesMu.Lock()
		l := clusterImages[img]
		if l == nil {
			l = &imageLoad{}
			clusterImages[img] = l
		}
		clusterImagesMu.Unlock()
		l.once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			l.err = sharedCluster.LoadImage(ctx, img)
		})
		if l.err != nil {
			t.Fatal(l.err)
		}
	}
	return sharedCluster
}

// closeCluster is TestMain's: the cluster goes after the last test.
func closeCluster() {
	if sharedCluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sharedCluster.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "remove the test cluster:", err)
	}
}

// swarmSettings are the daemon's settings for the cluster: the swarm
// backend on the manager, the nodes' engines (so that cleanups take the
// task containers off the shared cluster's nodes), the git service where
// the nodes reach the test machine.
func swarmSettings(c *clustertest.Cluster, image string) []string {
	return []string{
		"AIMI_ENGINE_BACKEND=swarm",
		"AIMI_ENGINE_HOST=" + c.Manager().Host,
		"AIMI_ENGINE_NODE_HOST=" + c.NodeHostTemplate(),
		"AIMI_GIT_ADDRESS=" + c.Gateway,
		"AIMI_SANDBOX_IMAGE=" + image,
		"AIMI_SANDBOX_MEMORY=256m",
		"AIMI_SANDBOX_SWAP=256m",
		"AIMI_SANDBOX_CPUS=0.5",
		"AIMI_SANDBOX_PIDS=256",
		"AIMI_SWARM_STOP_GRACE=2s",
	}
}

// cleanEnv is the test's environment without AIMI_* and DOCKER_* settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") && !strings.HasPrefix(kv, "DOCKER_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestSwarmBackendEndToEnd: the real daemon on the swarm backend, the real
// runner (sandbox image, demo agent) and local git mode across nodes. Three
// task files run to completed as services spread over at least two nodes
// (the API says which); the state validates, every journal holds exactly
// what an uninterrupted run journals with the task-request that was the
// service's config byte for byte, each branch one commit per story; the
// agent.env secret and the git tokens are in no service spec, task
// container environment, state file, journal, CLI answer or daemon log.
func TestSwarmBackendEndToEnd(t *testing.T) {
	parallelClusterAlone(t)
	started := time.Now()
	image := sandboxImage(t)
	// Alone: the scheduler spreads services by the tasks each node holds,
	// and other tests' tasks could leave one node the emptiest for all
	// three.
	c := testClusterAlone(t, image)
	t.Logf("cluster and image ready after %s", time.Since(started).Round(time.Second))

	repo, base, wantStories, branches := swarmE2ERepo(t)

	secret := "e2e-secret-" + dockertest.RunID()
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	config := "agent:\n  kind: demo\n  env:\n    E2E_SECRET: " + secret + "\ngit:\n  mode: local\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  dataDir,
		Config:   config,
		LogLevel: "debug",
		Base:     cleanEnv(),
		Env:      swarmSettings(c, image),
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, answers := recordingAimi(ctx, repo, sock)
	swarmStart := time.Now()
	code, out, errOut := run("swarm", "start", "--all", "--local", "--follow")
	if code != 0 {
		t.Fatalf("start --all --local --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("swarm followed to the end in %s", time.Since(swarmStart).Round(time.Second))
	view := waitFor(t, sock, repo, clusterWork, "every container exited", func(v api.SwarmView) bool {
		return len(v.Containers) == 3 && allExited(v)
	})
	checkSwarmNodes(t, run, view)
	waitSwarmBranchesPublished(t, repo, branches)

	sw := validState(t, repo)
	if len(sw.Containers) != 3 {
		t.Fatalf("%d containers in the state file, want 3", len(sw.Containers))
	}
	for _, sc := range sw.Containers {
		want := state.Progress{Total: wantStories[sc.ContainerName], Completed: wantStories[sc.ContainerName]}
		if sc.Status != state.StatusCompleted || sc.StoryProgress != want {
			t.Errorf("%s: %s %+v, want completed %+v", sc.ContainerName, sc.Status, sc.StoryProgress, want)
		}
	}
	m := c.Manager().Client
	for _, sc := range sw.Containers {
		checkSwarmJournal(t, ctx, m, repo, sw.SwarmID, sc, wantStories[sc.ContainerName])
	}
	for name, b := range branches {
		n := wantStories[name]
		if got := gitOut(t, repo, "rev-list", "--count", base+".."+b); got != strconv.Itoa(n) {
			t.Errorf("%s: %s commits on top of the base, want %d", b, got, n)
		}
	}

	checkSwarmSecretsNotInSpecs(t, ctx, c, sock, sw, secret)
	code, out, errOut = run("swarm", "cleanup")
	if code != 0 {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelSwarmID+"="+sw.SwarmID))
	if s, _ := m.ServiceList(ctx, swarm.ServiceListOptions{Filters: f}); len(s) != 0 {
		t.Errorf("%d services left after cleanup", len(s))
	}
	if s, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: f}); len(s) != 0 {
		t.Errorf("%d secrets left after cleanup", len(s))
	}
	p.stop(t)
	checkSwarmSecretNowhere(t, secret, p.logs(), *answers, repo, dataDir)
	t.Logf("total %s", time.Since(started).Round(time.Second))
}

// swarmE2ERepo makes a checkout with three task files committed on main;
// it returns it, the base commit, and the stories and branch of each
// container.
func swarmE2ERepo(t *testing.T) (repo, base string, wantStories map[string]int, branches map[string]string) {
	t.Helper()
	repo = shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	files := map[string]string{
		"linear-" + sfx:  localLinearTasks,
		"diamond-" + sfx: localDiamondTasks,
		"second-" + sfx:  strings.ReplaceAll(localLinearTasks, "feat/linear", "feat/second"),
	}
	wantStories = map[string]int{"aimi-linear-" + sfx: 3, "aimi-diamond-" + sfx: 4, "aimi-second-" + sfx: 3}
	branches = map[string]string{"aimi-linear-" + sfx: "feat/linear", "aimi-diamond-" + sfx: "feat/diamond", "aimi-second-" + sfx: "feat/second"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	base = gitOut(t, repo, "rev-parse", "HEAD")
	return repo, base, wantStories, branches
}

// checkSwarmNodes checks every container of view ran on a node the API
// names, exited cleanly, that they ran on at least two nodes and that
// `aimi swarm status` lists the nodes.
func checkSwarmNodes(t *testing.T, run func(args ...string) (int, string, string), view api.SwarmView) {
	t.Helper()
	nodes := map[string]bool{}
	for _, d := range view.Containers {
		if d.Node == "" {
			t.Errorf("%s: no node in the API's answer", d.Name)
		}
		nodes[d.Node] = true
		if d.ExitCode == nil || *d.ExitCode != 0 || len(d.Errors) != 0 || d.Rejected != 0 {
			t.Errorf("%s: exit %v errors %+v rejected %d", d.Name, d.ExitCode, d.Errors, d.Rejected)
		}
	}
	if len(nodes) < 2 {
		t.Errorf("the containers ran on %d node(s) %v, want at least 2", len(nodes), nodes)
	}
	code, out, _ := run("swarm", "status")
	for n := range nodes {
		if code != 0 || !strings.Contains(out, "Nodes:") || !strings.Contains(out, "  "+n+"\n") {
			t.Errorf("status does not show node %s: exit %d\n%s", n, code, out)
		}
	}
}

// waitSwarmBranchesPublished waits up to three minutes (a loaded cluster)
// for each branch to be published into the checkout.
func waitSwarmBranchesPublished(t *testing.T, repo string, branches map[string]string) {
	t.Helper()
	waitBranchesPublished(t, repo, slices.Collect(maps.Values(branches)), 3*time.Minute, nil)
}

// checkSwarmSecretsNotInSpecs checks the agent.env value and the names of
// the secret variables are nowhere in the service specs or the task
// containers' env, and the task containers carry the swarm's label.
func checkSwarmSecretsNotInSpecs(t *testing.T, ctx context.Context, c *clustertest.Cluster, sock string, sw *state.Swarm, secret string) {
	t.Helper()
	m := c.Manager().Client
	for _, sc := range sw.Containers {
		_, raw, err := m.ServiceInspectWithRaw(ctx, swarmmode.ServiceName(testInstance(sock), contract.Sandbox{Swarm: sw.SwarmID, Container: sc.ContainerName}), swarm.ServiceInspectOptions{})
		if err != nil {
			t.Fatalf("inspect the service of %s: %v", sc.ContainerName, err)
		}
		for _, bad := range []string{secret, contract.EnvGitToken + "="} {
			if strings.Contains(string(raw), bad) {
				t.Errorf("service inspect of %s shows %q", sc.ContainerName, bad)
			}
		}
		for _, n := range c.Nodes {
			cs, err := n.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+sc.ContainerName))})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range cs {
				in, err := n.Client.ContainerInspect(ctx, tc.ID)
				if err != nil {
					t.Fatal(err)
				}
				if in.Config.Labels[contract.LabelSwarmID] != sw.SwarmID {
					t.Errorf("%s: task container lacks the swarm label: %v", sc.ContainerName, in.Config.Labels)
				}
				for _, kv := range in.Config.Env {
					if strings.Contains(kv, secret) || strings.HasPrefix(kv, contract.EnvGitToken+"=") {
						t.Errorf("%s: task container env holds a secret (%s=...)", sc.ContainerName, strings.SplitN(kv, "=", 2)[0])
					}
				}
			}
		}
	}
}

// checkSwarmSecretNowhere checks the agent.env secret is not in the
// daemon's log, the CLI's answers or any file under the checkout and the
// data dir but the config.
func checkSwarmSecretNowhere(t *testing.T, secret, logs string, answers []string, repo, dataDir string) {
	t.Helper()
	check := func(where, text string) {
		if strings.Contains(text, secret) {
			t.Errorf("%s holds the agent.env secret", where)
		}
	}
	check("the daemon's log", logs)
	for _, a := range answers {
		check("a CLI answer", a)
	}
	for _, root := range []string{repo, dataDir} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Base(path) != "config.yaml" {
				if b, err := os.ReadFile(path); err == nil {
					check(path, string(b))
				}
			}
			return nil
		})
	}
}

// checkSwarmJournal: the journal holds one task-request, equal byte for byte
// to the request config the runner read, then each story in_progress and
// completed once and one completion.
func checkSwarmJournal(t *testing.T, ctx context.Context, m interface {
	ConfigList(context.Context, swarm.ConfigListOptions) ([]swarm.Config, error)
}, repo, swarmID string, sc *state.Container, stories int) {
	t.Helper()
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", swarmID, sc.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := m.ConfigList(ctx, swarm.ConfigListOptions{Filters: filters.NewArgs(
		filters.Arg("label", contract.LabelContainer+"="+sc.ContainerName), filters.Arg("label", contract.LabelSwarmObject+"=request"))})
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("%s: request config: %d, %v", sc.ContainerName, len(cfgs), err)
	}
	delivered := strings.TrimSuffix(string(cfgs[0].Spec.Data), "\n")
	requests, completions := 0, 0
	done := map[string]int{}
	for _, r := range recs {
		switch r.Stream {
		case state.StreamDaemon:
			if r.Type == string(acpmsg.TypeTaskRequest) {
				requests++
				if string(r.Message) != delivered {
					t.Errorf("%s: journaled task-request differs from the delivered one:\n%s\n%s", sc.ContainerName, r.Message, delivered)
				}
			}
		case state.StreamStdout:
			if !r.Valid {
				t.Errorf("%s: invalid stdout record %d", sc.ContainerName, r.Seq)
			}
			mm, err := acpmsg.ParseFromContainer(r.Message)
			if err != nil {
				t.Errorf("%s: %v", sc.ContainerName, err)
				continue
			}
			switch pl := mm.Payload.(type) {
			case *acpmsg.ProgressUpdate:
				done[pl.StoryID+":"+pl.Status]++
			case *acpmsg.Completion:
				completions++
			}
		}
	}
	if requests != 1 || completions != 1 {
		t.Errorf("%s: %d requests, %d completions journaled; want 1 and 1", sc.ContainerName, requests, completions)
	}
	for i := 1; i <= stories; i++ {
		for _, st := range []string{"in_progress", "completed"} {
			if k := fmt.Sprintf("US-%03d:%s", i, st); done[k] != 1 {
				t.Errorf("%s: %s journaled %d times", sc.ContainerName, k, done[k])
			}
		}
	}
}

// TestSwarmBackendDaemonKill9LosesNothing: aimid on the swarm backend is
// killed with SIGKILL while its services run and started again; every
// container completes and its journal holds each line exactly once.
func TestSwarmBackendDaemonKill9LosesNothing(t *testing.T) {
	parallelCluster(t)
	image := standinImage(t)
	c := testCluster(t, image)
	repo := gitRepo(t, 4, "kslow1", "kslow2", "kquick")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"pace|2s;auto|4\"\ngit:\n  mode: remote\n"
	start := func() *proc {
		return launch(t, daemonOpts{
			Sock:    sock,
			DataDir: filepath.Join(dir, "data"),
			Config:  config,
			Base:    cleanEnv(),
			Env:     swarmSettings(c, image),
		})
	}
	p := start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	// The kill lands once every service has begun its stories, while they
	// run: all three usually, but a loaded cluster starts services seconds
	// apart, and the first may have finished by the time the last begins.
	running, started := 0, 0
	waitFor(t, sock, repo, clusterWork, "the containers started, one running with progress", func(v api.SwarmView) bool {
		running, started = 0, 0
		for _, sc := range v.State.Containers {
			if sc.Status != state.StatusPending && sc.StoryProgress.Pending < sc.StoryProgress.Total {
				started++
			}
			if sc.Status == state.StatusRunning && sc.StoryProgress.Pending < sc.StoryProgress.Total && sc.StoryProgress.Completed < sc.StoryProgress.Total {
				running++
			}
		}
		return len(v.State.Containers) == 3 && started == 3 && running >= 1
	})
	t.Logf("%d of 3 services running with progress when the daemon is killed", running)
	p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(t)
	// The services run on without the daemon for a while.
	time.Sleep(3 * time.Second)
	p2 := start()
	view := waitFor(t, sock, repo, clusterWork, "every container terminal and exited", allExited)
	p2.stop(t)
	// A daemon started after they finished still says where each ran.
	p3 := start()
	after := waitFor(t, sock, repo, time.Minute, "the swarm adopted", func(v api.SwarmView) bool { return len(v.Containers) == 3 })
	p3.stop(t)
	before := map[string]string{}
	for _, d := range view.Containers {
		before[d.Name] = d.Node
	}
	for _, d := range after.Containers {
		if d.Node == "" || d.Node != before[d.Name] {
			t.Errorf("%s: node %q after a restart, %q before", d.Name, d.Node, before[d.Name])
		}
	}
	sw := validState(t, repo)
	if len(sw.Containers) != 3 {
		t.Fatalf("%d containers", len(sw.Containers))
	}
	checkExactJournals(t, repo, sw, 4)
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	eng, err := swarmmode.New(cctx, c.Manager().Client, swarmmode.Options{Instance: testInstance(sock), NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range sw.Containers {
		_ = eng.Remove(cctx, sc.ContainerID)
	}
}

// TestSwarmBackendNodeLostThenRetry: a worker node's container is stopped
// while a swarm runs; the container on it ends failed with NODE_LOST within
// 60 s, the others complete, and resume --retry-failed runs it again on a
// live node to completed. The node is started again at the end.
func TestSwarmBackendNodeLostThenRetry(t *testing.T) {
	parallelClusterAlone(t)
	image := standinImage(t)
	c := testClusterAlone(t, image)
	repo := gitRepo(t, 3, "nl1", "nl2", "nl3")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"pace|3s;auto|3\"\ngit:\n  mode: remote\n"
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    cleanEnv(),
		Env:     swarmSettings(c, image),
	})
	defer p.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	victim, node := "", -1
	waitFor(t, sock, repo, clusterWork, "a container running on a worker", func(v api.SwarmView) bool {
		for _, d := range v.Containers {
			for i, n := range c.Nodes[1:] {
				if d.Node != "" && strings.HasSuffix(n.Name, "-"+d.Node) && d.Status == string(state.StatusRunning) {
					victim, node = d.Name, i+1
					return true
				}
			}
		}
		return false
	})
	stopped := time.Now()
	if err := c.StopNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartNode(context.Background(), node); err != nil {
			t.Errorf("start the node again: %v", err)
		}
	})
	waitFor(t, sock, repo, 90*time.Second, "the container on the stopped node failed", func(v api.SwarmView) bool {
		for _, d := range v.Containers {
			if d.Name == victim {
				return d.Status == string(state.StatusFailed)
			}
		}
		return false
	})
	lost := time.Since(stopped)
	view := waitFor(t, sock, repo, clusterWork, "every container terminal", allExited)
	retried := checkNodeLossEnds(t, c, node, victim, view)
	t.Logf("NODE_LOST recorded %s after the node stopped", lost.Round(time.Second))
	if lost > 60*time.Second {
		t.Errorf("NODE_LOST took %s, want at most 60 s", lost)
	}
	if code, out, errOut := aimi(ctx, "swarm", "resume", "--retry-failed", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("resume --retry-failed: exit %d\n%s\n%s", code, out, errOut)
	}
	view = waitFor(t, sock, repo, clusterWork, "the retried containers completed", func(v api.SwarmView) bool {
		done := 0
		for _, d := range v.Containers {
			if retried[d.Name] && d.Status == string(state.StatusCompleted) && d.Finished {
				done++
			}
		}
		return done == len(retried)
	})
	for _, d := range view.Containers {
		if retried[d.Name] && strings.HasSuffix(c.Nodes[node].Name, "-"+d.Node) {
			t.Errorf("%s ran again on the stopped node %s", d.Name, d.Node)
		}
	}
	validState(t, repo)
}

// checkNodeLossEnds checks the containers on the stopped node (victim and
// any placed there) failed and the others completed; it returns the
// failed ones, to be retried.
func checkNodeLossEnds(t *testing.T, c *clustertest.Cluster, node int, victim string, view api.SwarmView) map[string]bool {
	t.Helper()
	// Another container placed on the stopped node ends too: NODE_LOST if
	// it ran, a start failure if the node went down while it started.
	onStopped := func(d api.ContainerDetail) bool {
		return d.Name == victim || (d.Node != "" && strings.HasSuffix(c.Nodes[node].Name, "-"+d.Node))
	}
	retried := map[string]bool{}
	for _, d := range view.Containers {
		if onStopped(d) {
			code := ""
			if len(d.Errors) > 0 {
				code = d.Errors[0].Code
			}
			if d.Status != string(state.StatusFailed) || (code != swarmmode.CodeNodeLost && (d.Name == victim || code != orchestrator.CodeStartFailed)) {
				t.Fatalf("%s on the stopped node %s: %s %+v", d.Name, d.Node, d.Status, d.Errors)
			}
			retried[d.Name] = true
			continue
		}
		if d.Status != string(state.StatusCompleted) {
			t.Errorf("%s on a live node %s: %s %+v", d.Name, d.Node, d.Status, d.Errors)
		}
	}
	return retried
}
