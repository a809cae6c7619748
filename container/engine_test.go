package container

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// rig is what the tests against the real engine share: one testbox image,
// one run label on everything they create, one isolating network.
type rig struct {
	d     *Docker
	cli   *client.Client
	image string
	run   string
	net   string
}

// TestEngine proves the package against the real Docker engine. Its
// subtests run concurrently; every resource they create carries the run's
// label and is removed by them, and the last cleanup checks that nothing
// survived.
func TestEngine(t *testing.T) {
	ctx := context.Background()
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	var imageTag string
	// Registered first, so it runs last: after every other cleanup.
	t.Cleanup(func() { assertNothingSurvives(t, cli, run, imageTag) })
	imageTag = dockertest.BuildGoImage(t, ctx, map[string]string{"/testbox": "./internal/testbox"}, nil, map[string]string{dockertest.LabelKey: run})
	dockertest.Cleanup(t, dockertest.LabelKey, run)

	e := &rig{
		d:     newDocker(cli, WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))),
		cli:   cli,
		image: imageTag,
		run:   run,
		net:   "aimi-ct-" + run + "-net",
	}
	if _, err := e.d.EnsureNetwork(ctx, e.net, e.labels()); err != nil {
		t.Fatal(err)
	}
	// The cases wait on the engine most of the time, so they all run at
	// once. t.Run from goroutines instead of t.Parallel: -parallel defaults
	// to GOMAXPROCS (2 here), which would run them two at a time.
	cases := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"10000 lines printed at once are all read in order", e.testManyLines},
		{"oversized line between two good ones is reported and skipped", e.testOversized},
		{"line written through attach reaches stdin which stays open", e.testStdin},
		{"32 MiB memory limit and an allocation loop end in OOM", e.testOOM},
		{"stop within grace reads the trap's last line and exit code", e.testStopGrace},
		{"stop past grace kills", e.testStopKill},
		{"re-reading from a cursor loses and repeats no line", e.testCursorResume},
		{"stderr resumes from its own cursor and no line comes twice", e.testStderrResume},
		{"a held-back container is stopped inspected and waited for within bounds", e.testStopWhileHeldBack},
		{"inspect shows limits labels security options and network", e.testInspect},
		{"read-only root keeps scratch paths and /tmp writable", e.testReadOnlyRootKeepsScratchWritable},
		{"a container cannot connect to another's listening port", e.testIsolation},
		{"50 containers with their networks start at once", e.testFifty},
		{"name collision missing image invalid name are clear errors leaving nothing", e.testCreateErrors},
		{"exit code and die event are reported", e.testExitAndEvents},
		{"network is kept while a container refers to it", e.testNetworkLifecycle},
		{"a last line without newline is read after the exit, not while running", e.testUnterminated},
		{"a wait that breaks inspects and waits again", e.testWaitBreaks},
		{"twenty waited containers get their exits from one event stream", e.testExitsShareOneStream},
		{"a wait on a running or exited container gets its exit", e.testWaitOnRunning},
		{"exits during and after a broken event stream reach their waiters", e.testExitStreamBreaks},
		{"a container removed while waited for reports not found", e.testWaitRemoved},
		{"a container outside the event stream's labels is waited for alone", e.testWaitWithoutLabels},
		{"a disk limit is applied where the driver can and refused clearly where not", e.testDiskLimit},
		{"a sealed sandbox starts without network setup and has its loopback and localhost only", e.testSealed},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() { t.Run(c.name, c.fn) })
	}
	wg.Wait()
	// Alone, after the others: a whole flood past the log's rotation needs
	// the engine to answer the reader within the hold-back's stall bound
	// (holdStall), which the cases above (fifty containers at once) can
	// break on 2 loaded cores; past it the hold-back lets output flow and
	// the log may rotate lines away unread.
	t.Run("a flood past the engine's log rotation reaches a slow reader whole", e.testFloodPastRotation)
	if left, err := e.d.List(ctx, map[string]string{dockertest.LabelKey: run}); err != nil || len(left) != 0 {
		t.Errorf("containers left after the subtests: %d (%v)", len(left), err)
	}
}

func (e *rig) labels() map[string]string {
	return map[string]string{dockertest.LabelKey: e.run, contract.LabelSwarmID: "swarm-" + e.run, contract.LabelProject: "/test"}
}

// spec returns a spec for the testbox with the given script; name gets the
// run's prefix.
func (e *rig) spec(name, script string) engine.Spec {
	return engine.Spec{
		Name:    "aimi-ct-" + e.run + "-" + name,
		Image:   e.image,
		Labels:  e.labels(),
		Env:     []string{"TESTBOX_SCRIPT=" + script},
		Network: e.net,
	}
}

// create creates the container and removes it when the test ends.
func (e *rig) create(t *testing.T, ctx context.Context, s engine.Spec) string {
	t.Helper()
	id, err := e.d.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.d.Remove(cctx, id); err != nil {
			t.Errorf("remove %s: %v", s.Name, err)
		}
	})
	return id
}

// launch creates, registers wait and lines, then starts: the order the
// orchestrator uses.
func (e *rig) launch(t *testing.T, ctx context.Context, s engine.Spec) (string, <-chan engine.Exit, <-chan engine.Line) {
	t.Helper()
	id := e.create(t, ctx, s)
	exit := e.d.Wait(ctx, id)
	lines, err := e.d.Lines(ctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id, exit, lines
}

// testCtx bounds one case. Generous: on a shared, loaded engine creating 50
// containers has taken 75s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// drain reads until the channel closes; a stream failure fails the test.
func drain(t *testing.T, ch <-chan engine.Line) []engine.Line {
	t.Helper()
	var got []engine.Line
	for l := range ch {
		if l.Err != nil && l.Cursor.IsZero() {
			t.Fatalf("stream failed: %v", l.Err)
		}
		got = append(got, l)
	}
	return got
}

// until reads lines until one's text is want; it returns all read so far.
func until(t *testing.T, ch <-chan engine.Line, want string) []engine.Line {
	t.Helper()
	var got []engine.Line
	for l := range ch {
		got = append(got, l)
		if string(l.Data) == want {
			return got
		}
	}
	t.Fatalf("output ended before %q; got %s", want, texts(got))
	return nil
}

func texts(ls []engine.Line) []string {
	var out []string
	for _, l := range ls {
		if l.Err != nil {
			out = append(out, "ERR:"+l.Err.Error())
			continue
		}
		out = append(out, string(l.Data))
	}
	return out
}

func waitExit(t *testing.T, ch <-chan engine.Exit) engine.Exit {
	t.Helper()
	ex := <-ch
	if ex.Err != nil {
		t.Fatalf("wait: %v", ex.Err)
	}
	return ex
}

// assertNothingSurvives checks, after all cleanups, that the engine holds no
// container, network or image of this run.
func assertNothingSurvives(t *testing.T, cli *client.Client, run, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", dockertest.LabelKey+"="+run))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil || len(cs) != 0 {
		t.Errorf("containers survived the suite: %d (%v)", len(cs), err)
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Errorf("list networks: %v", err)
	}
	for _, n := range ns {
		if dockertest.Leaked(ctx, cli, n.ID) {
			t.Logf("network %s kept by the engine for an endpoint nobody holds (moby/moby#43286)", n.Name)
			continue
		}
		t.Errorf("network %s survived the suite", n.Name)
	}
	if tag != "" {
		is, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("reference", tag))})
		if err != nil || len(is) != 0 {
			t.Errorf("image %s survived the suite (%v)", tag, err)
		}
	}
}
