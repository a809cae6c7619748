package swarmmode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/swarmmode"
)

var (
	cluster *clustertest.Cluster
	probe   string // image on every node
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Getenv(dockertest.SkipEnv) == "1" {
		return clustertest.Run(m, clustertest.Options{}, func(*clustertest.Cluster) {})
	}
	cli, err := dockertest.NewClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	dir, err := os.MkdirTemp("", "swarmmode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tag, remove, err := dockertest.BuildGoImageE(ctx, cli, "swarmmode-probe", dir, map[string]string{"/probe": "./internal/probe"}, nil, nil)
	defer func() { _ = remove(context.Background()) }()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	probe = tag
	return clustertest.Run(m, clustertest.Options{Images: []string{tag}}, func(c *clustertest.Cluster) { cluster = c })
}

func newEngine(t *testing.T) (*swarmmode.Engine, *clustertest.Cluster) {
	t.Helper()
	c := clustertest.Need(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := swarmmode.New(ctx, c.Manager().Client, swarmmode.Options{HostAddr: c.Gateway, StopGrace: 5 * time.Second, Poll: 200 * time.Millisecond, NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func spec(t *testing.T, name string, env ...string) engine.Spec {
	return engine.Spec{
		Name: name, Image: probe, Env: env,
		Labels:   map[string]string{contract.LabelSwarmID: "test-" + t.Name(), contract.LabelProject: "/p"},
		NanoCPUs: 5e8, MemoryBytes: 64 << 20, PidsLimit: 64,
	}
}

// serviceOf is the service of the sandbox spec(t, name) makes, for an
// engine of no instance.
func serviceOf(t *testing.T, name string) string {
	return swarmmode.ServiceName("", contract.Sandbox{Swarm: "test-" + t.Name(), Container: name})
}

// create creates a sandbox of s, removed when the test ends.
func create(t *testing.T, ctx context.Context, e *swarmmode.Engine, s engine.Spec) string {
	t.Helper()
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Remove(context.Background(), id) })
	return id
}

func request(t *testing.T, r map[string]any) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func collect(t *testing.T, lines <-chan engine.Line) []engine.Line {
	t.Helper()
	var out []engine.Line
	for l := range lines {
		if l.Err != nil && l.Cursor.IsZero() {
			t.Fatalf("stream failed: %v", l.Err)
		}
		out = append(out, l)
	}
	return out
}

func stdout(lines []engine.Line) []string {
	var s []string
	for _, l := range lines {
		if l.Stream == engine.Stdout {
			s = append(s, string(l.Data))
		}
	}
	return s
}

// A sandbox goes created -> (request delivered) -> running -> exited with
// its exit code; its output is read in order from the task's logs, and
// again from a cursor with exactly the lines after it; the secret reached
// the process as a file but appears in neither the service spec nor the
// task container's environment; the request and the read-only file arrive
// as configs; Remove leaves no service, config, secret or network.
func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	secret := "s3cr3t-" + c.RunID
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not really a CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spec(t, "aimi-lifecycle", "PROBE_SECRET="+secret, "AIMI_AGENT=demo")
	s.Mounts = []engine.Mount{{Source: ca, Target: "/etc/aimi/git-ca.pem", ReadOnly: true}}
	id := create(t, ctx, e, s)
	info, err := e.Inspect(ctx, id)
	if err != nil || info.Status != "created" || info.Name != "aimi-lifecycle" {
		t.Fatalf("after create: %+v, %v", info, err)
	}
	list, err := e.List(ctx, map[string]string{contract.LabelSwarmID: "test-" + t.Name()})
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("list: %+v, %v", list, err)
	}
	lines, err := e.Lines(ctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	exit := e.Wait(ctx, id)
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	req := request(t, map[string]any{"lines": 5, "exit": 7})
	if err := e.WriteStdin(ctx, id, req); err != nil {
		t.Fatal(err)
	}
	ex := <-exit
	if ex.Err != nil || ex.Code != 7 || ex.Failure != "" {
		t.Fatalf("exit: %+v", ex)
	}
	got := followUntilDone(ctx, lines)
	want := []string{"request " + strings.TrimSuffix(string(req), "\n"), "secret " + secret, "line 0", "line 1", "line 2", "line 3", "line 4", "done"}
	if g := stdout(got); strings.Join(g, "|") != strings.Join(want, "|") {
		t.Fatalf("followed lines:\n got %q\nwant %q", g, want)
	}
	rest := collect(t, mustLines(t, e, ctx, id, logcursor.Position{Stdout: got[3].Cursor}))
	if g := stdout(rest); strings.Join(g, "|") != strings.Join(want[4:], "|") {
		t.Fatalf("lines after cursor %s: got %q want %q", got[3].Cursor, g, want[4:])
	}
	info, err = e.Inspect(ctx, id)
	if err != nil || info.Status != "exited" || info.ExitCode != 7 || info.Node == "" {
		t.Fatalf("after exit: %+v, %v", info, err)
	}
	if info.MemoryBytes != 64<<20 || info.NanoCPUs != 5e8 || info.PidsLimit != 64 || strings.Join(info.CapDrop, ",") != "ALL" {
		t.Fatalf("limits and capabilities: %+v", info)
	}

	m := c.Manager().Client
	checkLifecycleService(t, ctx, c, m, id, info, secret)

	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"=aimi-lifecycle"))
	checkNothingLeft(t, ctx, m, f)
	if _, err := e.Inspect(ctx, id); err == nil {
		t.Errorf("inspect after remove found it")
	}
}

// followUntilDone collects the followed lines up to the one saying done,
// giving up after 30 seconds.
func followUntilDone(ctx context.Context, lines <-chan engine.Line) []engine.Line {
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	var got []engine.Line
	for l := range lines {
		got = append(got, l)
		if string(l.Data) == "done" {
			ccancel()
		}
		if cctx.Err() != nil {
			break
		}
	}
	return got
}

// checkLifecycleService checks the sandbox id is the 64-digit shape the
// state file keeps, and the service spec and task container hold no secret
// value and have the memory reservation and the job mode.
func checkLifecycleService(t *testing.T, ctx context.Context, c *clustertest.Cluster, m *client.Client, id string, info engine.Info, secret string) {
	t.Helper()
	if len(id) != 64 || info.ID != id {
		t.Fatalf("sandbox id %q (inspect says %q): want 64 hex digits, the state file's containerId shape", id, info.ID)
	}
	svc, raw, err := m.ServiceInspectWithRaw(ctx, serviceOf(t, "aimi-lifecycle"), swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) {
		t.Fatalf("service inspect shows the secret value: %s", raw)
	}
	if !strings.Contains(string(raw), `"Memory`) || !strings.Contains(string(raw), "ReplicatedJob") {
		t.Fatalf("service spec lacks the memory reservation or the job mode: %s", raw)
	}
	checkTaskContainer(t, ctx, c, info.Node, svc.ID, secret)
}

func mustLines(t *testing.T, e *swarmmode.Engine, ctx context.Context, id string, after logcursor.Position) <-chan engine.Line {
	t.Helper()
	l, err := e.Lines(ctx, id, after, false)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkTaskContainer inspects the task's container on its node (by service
// id: a container of an earlier run's service of that name may linger): the
// org.aimi.* labels are there, the secret is not in its environment, the
// capabilities are dropped.
func checkTaskContainer(t *testing.T, ctx context.Context, c *clustertest.Cluster, node, serviceID, secret string) {
	t.Helper()
	for _, n := range c.Nodes {
		if !strings.HasSuffix(n.Name, "-"+node) {
			continue
		}
		cs, err := n.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "com.docker.swarm.service.id="+serviceID))})
		if err != nil || len(cs) != 1 {
			t.Fatalf("task container on %s: %d, %v", node, len(cs), err)
		}
		in, err := n.Client.ContainerInspect(ctx, cs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if in.Config.Labels[contract.LabelSwarmID] == "" || in.Config.Labels[contract.LabelSandbox] != "true" {
			t.Errorf("task container labels: %v", in.Config.Labels)
		}
		for _, kv := range in.Config.Env {
			if strings.Contains(kv, secret) {
				t.Errorf("task container env has the secret: %s", kv)
			}
		}
		if strings.Join(in.HostConfig.CapDrop, ",") != "ALL" && strings.Join(in.HostConfig.CapDrop, ",") != "CAP_ALL" {
			t.Errorf("cap drop: %v", in.HostConfig.CapDrop)
		}
		return
	}
	t.Fatalf("no node named %s", node)
}

// waitFor follows the output until a line equals want.
func waitFor(t *testing.T, ctx context.Context, e *swarmmode.Engine, id, want string) {
	t.Helper()
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lines, err := e.Lines(fctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		if string(l.Data) == want {
			return
		}
	}
	t.Fatalf("no line %q from %s", want, id)
}

// A task whose image no node has is refused: the manager must have the
// image to tell which user it runs as (the secret files are kept from that
// user), so delivery fails naming the image and the fix; a manager that has
// it while no worker does gets the task rejected, and Wait reports
// CONTAINER_START_FAILED with the engine's reason.
func TestMissingImageIsStartFailed(t *testing.T) {
	t.Parallel()
	e, _ := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := spec(t, "aimi-noimage")
	s.Image = "aimi-test/does-not-exist:never"
	id := create(t, ctx, e, s)
	exit := e.Wait(ctx, id)
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{})); err != nil {
		if !strings.Contains(err.Error(), s.Image) || !strings.Contains(err.Error(), "pull or load the image") {
			t.Fatalf("delivery refused without naming the image and the fix: %v", err)
		}
		return
	}
	ex := <-exit
	if ex.Failure != engine.CodeStartFailed || ex.FailureReason == "" {
		t.Fatalf("exit: %+v", ex)
	}
}

// Sandboxes cannot reach each other: each has its own overlay network. A
// listener in one is reachable from a task attached to its network (the
// control) and not from another sandbox.
func TestSandboxesAreIsolated(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := create(t, ctx, e, spec(t, "aimi-iso-listener"))
	if err := e.WriteStdin(ctx, a, request(t, map[string]any{"sleep": "5m", "listen": ":8080"})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, e, a, "listening")
	info, err := e.Inspect(ctx, a)
	if err != nil || len(info.Networks) != 1 {
		t.Fatalf("listener networks: %+v, %v", info.Networks, err)
	}
	var netName, ip string
	for netName, ip = range info.Networks {
	}
	target := ip + ":8080"

	b := create(t, ctx, e, spec(t, "aimi-iso-dialer"))
	if err := e.WriteStdin(ctx, b, request(t, map[string]any{"dial": target})); err != nil {
		t.Fatal(err)
	}
	<-e.Wait(ctx, b)
	if got := stdout(collect(t, mustLines(t, e, ctx, b, logcursor.Position{}))); !contains(got, "dial failed") {
		t.Fatalf("another sandbox reached the listener at %s: %q", target, got)
	}

	// Control: a task on the listener's own network reaches it.
	m := c.Manager().Client
	one := uint64(1)
	resp, err := m.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "control-" + c.RunID},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: probe, Env: []string{`PROBE_REQUEST={"dial":"` + target + `","tries":10}`}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: netName}},
		},
		Mode: swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: &one, TotalCompletions: &one}},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.ServiceRemove(context.Background(), resp.ID) })
	for {
		tasks, err := m.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", resp.ID))})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 1 && tasks[0].Status.State == swarm.TaskStateComplete {
			break
		}
		if len(tasks) == 1 && (tasks[0].Status.State == swarm.TaskStateFailed || tasks[0].Status.State == swarm.TaskStateRejected) {
			t.Fatalf("control task: %s %s", tasks[0].Status.State, tasks[0].Status.Err)
		}
		if ctx.Err() != nil {
			t.Fatal("control task did not complete")
		}
		time.Sleep(200 * time.Millisecond)
	}
	rc, err := m.ServiceLogs(ctx, resp.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out strings.Builder
	_, _ = stdcopy.StdCopy(&out, io.Discard, rc)
	if !strings.Contains(out.String(), "dial ok") {
		t.Fatalf("control on the listener's network could not reach %s: %s", target, out.String())
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// A worker node going down ends its task with NODE_LOST within 60 s (the
// manager notices a node missing its heartbeats in about 15 s). Runs before
// the parallel tests and restarts the node at its end.
func TestNodeLost(t *testing.T) {
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Three sleepers, spread one per node by the scheduler; the one on a
	// worker is the victim.
	var ids []string
	for i := 0; i < 3; i++ {
		id, err := e.Create(ctx, spec(t, fmt.Sprintf("aimi-lost-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		t.Cleanup(func() { _ = e.Remove(context.Background(), id) })
		if err := e.WriteStdin(ctx, id, request(t, map[string]any{"sleep": "5m", "listen": ":8080"})); err != nil {
			t.Fatal(err)
		}
	}
	victim, node := "", -1
	nodeOf := map[string]string{}
	for _, id := range ids {
		waitFor(t, ctx, e, id, "listening")
		info, err := e.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		nodeOf[id] = info.Node
		for i, n := range c.Nodes[1:] {
			if strings.HasSuffix(n.Name, "-"+info.Node) && victim == "" {
				victim, node = id, i+1
			}
		}
	}
	if victim == "" {
		t.Fatal("no sandbox landed on a worker")
	}
	exit := e.Wait(ctx, victim)
	stopped := time.Now()
	if err := c.StopNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartNode(context.Background(), node); err != nil {
			t.Errorf("restart node: %v", err)
		}
	})
	ex := <-exit
	took := time.Since(stopped)
	if ex.Failure != swarmmode.CodeNodeLost || took > 60*time.Second {
		t.Fatalf("exit after node stop (%s): %+v", took, ex)
	}
	t.Logf("NODE_LOST after %s: %s", took.Round(time.Millisecond), ex.FailureReason)
	// The output read so far stays readable without waiting for the node.
	if _, err := e.Lines(ctx, victim, logcursor.Position{}, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		// The spread is the scheduler's choice: a node restarted by an
		// earlier run (-count) may get none, another two.
		if nodeOf[id] == nodeOf[victim] {
			continue
		}
		if info, err := e.Inspect(ctx, id); err != nil || !info.Running {
			t.Errorf("%s on a live node: %+v, %v", id, info, err)
		}
	}
}

// The orchestrator drives the engine through its Engine interface.

// sandbox.read_only_root reaches the task's container: a read-only root
// with a tmpfs /tmp and a volume for each scratch path.
func TestReadOnlyRoot(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := spec(t, "aimi-readonly")
	s.ReadOnlyRootfs, s.Scratch = true, []string{"/work"}
	id := create(t, ctx, e, s)
	exit := e.Wait(ctx, id)
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if ex := <-exit; ex.Err != nil || ex.Code != 0 {
		t.Fatalf("exit: %+v", ex)
	}
	info, err := e.Inspect(ctx, id)
	if err != nil || !info.ReadOnlyRootfs {
		t.Fatalf("inspect: %+v, %v", info, err)
	}
	svc, _, err := c.Manager().Client.ServiceInspectWithRaw(ctx, serviceOf(t, "aimi-readonly"), swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if !strings.HasSuffix(n.Name, "-"+info.Node) {
			continue
		}
		cs, err := n.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "com.docker.swarm.service.id="+svc.ID))})
		if err != nil || len(cs) != 1 {
			t.Fatalf("task container: %d, %v", len(cs), err)
		}
		in, err := n.Client.ContainerInspect(ctx, cs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !in.HostConfig.ReadonlyRootfs {
			t.Error("the task container's root is writable")
		}
		mounts := map[string]string{}
		for _, m := range in.Mounts {
			mounts[m.Destination] = string(m.Type)
		}
		if mounts["/tmp"] != "tmpfs" || mounts["/work"] != "volume" {
			t.Errorf("mounts: %v", mounts)
		}
		return
	}
	t.Fatalf("no node named %s", info.Node)
}

// checkNothingLeft: no service, secret or config matches f.
func checkNothingLeft(t *testing.T, ctx context.Context, m *client.Client, f filters.Args) {
	t.Helper()
	if l, _ := m.ServiceList(ctx, swarm.ServiceListOptions{Filters: f}); len(l) != 0 {
		t.Errorf("services left: %d", len(l))
	}
	if l, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: f}); len(l) != 0 {
		t.Errorf("secrets left: %d", len(l))
	}
	if l, _ := m.ConfigList(ctx, swarm.ConfigListOptions{Filters: f}); len(l) != 0 {
		t.Errorf("configs left: %d", len(l))
	}
}
