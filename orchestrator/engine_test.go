package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// The real-engine tests share one stand-in runner image, built in TestMain.
var (
	standinImage string
	standinErr   error
)

// childEnv marks the re-executed test binary that plays a daemon to be
// killed with SIGKILL (TestRealCrashRecovery).
const childEnv = "ORCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childDaemon())
	}
	var remove func(context.Context) error
	if os.Getenv(dockertest.SkipEnv) != "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cli, err := dockertest.NewClient()
		if err == nil {
			dir, _ := os.MkdirTemp("", "standin-build-")
			standinImage, remove, standinErr = dockertest.BuildGoImageE(ctx, cli, "orchestrator-standin", dir,
				map[string]string{"/standin": "./internal/standin"}, nil, nil)
			os.RemoveAll(dir)
		} else {
			standinErr = err
		}
		cancel()
		code := m.Run()
		if remove != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
			_ = remove(rctx)
			rcancel()
		}
		if cli != nil {
			cli.Close()
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// realEngine returns the Docker engine and a run label for a real-engine
// test, or skips/fails per dockertest's policy.
func realEngine(t *testing.T) (*container.Docker, map[string]string) {
	t.Helper()
	if os.Getenv(dockertest.SkipEnv) == "1" {
		t.Skip("no Docker engine (" + dockertest.SkipEnv + "=1)")
	}
	if standinErr != nil {
		t.Fatalf("build the stand-in image: %v", standinErr)
	}
	ctx := context.Background()
	d, err := container.NewDocker(ctx, container.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	t.Cleanup(func() { d.Close() })
	return d, map[string]string{dockertest.LabelKey: run}
}

// scriptKey is the stand-in's env suffix for a task file.
func scriptKey(taskFile string) string {
	b := []byte(strings.ToUpper(path.Base(taskFile)))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return "STANDIN_SCRIPT__" + string(b)
}

// realManager starts a Manager on the real engine with per-task scripts.
func realManager(t *testing.T, eng engine.Engine, labels map[string]string, cfg Config) *Manager {
	t.Helper()
	cfg.Image = standinImage
	cfg.Labels = labels
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = 64 << 20
		cfg.MemorySwapBytes = 64 << 20
	}
	m, err := New(context.Background(), cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m
}

// uniqueNames prefixes task names with the test run so container names do
// not collide with parallel test runs on the same engine.
func uniqueNames(labels map[string]string, names ...string) []string {
	run := strings.ReplaceAll(labels[dockertest.LabelKey], "-", "")
	if len(run) > 10 {
		run = run[len(run)-10:]
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "e1" + run + "-" + n
	}
	return out
}

// peakRunning polls the engine for the number of running containers with
// the labels until stop is closed. A poll takes a moment, so a true overlap
// would have to last that long to be seen; the stand-in's 40ms pace makes
// each container run far longer than a poll.
func peakRunning(t *testing.T, d *container.Docker, labels map[string]string, stop <-chan struct{}) func() int {
	var mu sync.Mutex
	peak := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			infos, err := d.List(context.Background(), labels)
			if err == nil {
				// The list endpoint reads the engine's eventually
				// consistent view: a container that just exited can
				// still be listed as running. Inspect is authoritative.
				n := 0
				for _, in := range infos {
					if !in.Running {
						continue
					}
					if fresh, err := d.Inspect(context.Background(), in.ID); err == nil && fresh.Running {
						n++
					}
				}
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
		}
	}()
	return func() int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func TestRealSwarmOfSixWithMaxTwo(t *testing.T) {
	t.Parallel() // on the engine with their own labels, names and repositories
	d, labels := realEngine(t)
	names := uniqueNames(labels, "a", "b", "c", "d", "e", "f")
	repo, files := testRepo(t, names, 3)
	m := realManager(t, d, labels, Config{RunnerEnv: map[string]string{"STANDIN_SCRIPT": "pace|40ms;auto|3"}})
	stop := make(chan struct{})
	peak := peakRunning(t, d, labels, stop)
	v, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 2})
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	for _, c := range v.State.Containers {
		if c.Status != state.StatusPending && c.Status != state.StatusRunning || c.ContainerID == "" {
			t.Errorf("at start %s: %s with id %q", c.ContainerName, c.Status, c.ContainerID)
		}
	}
	v = waitTerminal(t, m, repo, 90*time.Second)
	close(stop)
	if p := peak(); p > 2 {
		t.Errorf("peak running = %d, want <= 2", p)
	}
	sw := validateStateFile(t, repo)
	if len(sw.Containers) != 6 {
		t.Fatalf("%d entries, want 6", len(sw.Containers))
	}
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: 3, Completed: 3}) || c.ACPPID != nil {
			t.Errorf("%s: %s %+v pid %v", c.ContainerName, c.Status, c.StoryProgress, c.ACPPID)
		}
		recs := readJournal(t, repo, sw.SwarmID, c.ContainerName)
		if len(recs) != 8 {
			t.Errorf("%s: %d journal records, want 8 (task-request, 6 progress, completion)", c.ContainerName, len(recs))
		}
		for _, r := range recs {
			if !r.Valid || r.Rejected != "" {
				t.Errorf("%s: unexpected bad record %+v", c.ContainerName, r)
			}
		}
	}
	_ = v
}

func TestRealOutcomesAndBadLines(t *testing.T) {
	t.Parallel()
	d, labels := realEngine(t)
	names := uniqueNames(labels, "bad", "oom", "crash", "exit0", "errmsg")
	repo, files := testRepo(t, names, 1)
	env := map[string]string{
		scriptKey(files[0]): "raw|npm WARN not json;big|70000;raw|{\"type\":\"progress-update\"};progress|US-009|in_progress|x;progress|US-001|completed|skip;auto|1",
		scriptKey(files[1]): "progress|US-001|in_progress|go;oom",
		scriptKey(files[2]): "progress|US-001|in_progress|go;exit|3",
		scriptKey(files[3]): "progress|US-001|in_progress|go;exit|0",
		scriptKey(files[4]): "error|GIT_CLONE_FAILED|no route;exit|1",
	}
	// The timeout case has a manager of its own with a short timeout: on a
	// loaded engine the others may take longer than that to end by
	// themselves, and must not be stopped for it.
	td, tlabels := realEngine(t)
	trepo, tfiles := testRepo(t, uniqueNames(tlabels, "timeout"), 1)
	tm := realManager(t, td, tlabels, Config{RunnerEnv: map[string]string{scriptKey(tfiles[0]): "progress|US-001|in_progress|go;sleep|60s"},
		Timeout: 4 * time.Second, StopGrace: time.Second, MemoryBytes: 32 << 20, MemorySwapBytes: 32 << 20})
	m := realManager(t, d, labels, Config{RunnerEnv: env, Timeout: 2 * time.Minute, StopGrace: time.Second,
		MemoryBytes: 32 << 20, MemorySwapBytes: 32 << 20})
	if _, err := tm.Start(context.Background(), api.StartRequest{RepoPath: trepo, TaskFiles: tfiles, Max: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 6}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 3*time.Minute)
	validateStateFile(t, repo)
	tv := waitTerminal(t, tm, trepo, 3*time.Minute)
	validateStateFile(t, trepo)
	cases := []struct {
		v                  api.SwarmView
		frag, status, code string
	}{
		{v, "-bad", "completed", ""},
		{v, "-oom", "failed", "CONTAINER_OOM"},
		{tv, "-timeout", "failed", "CONTAINER_TIMEOUT"},
		{v, "-crash", "failed", "AGENT_CRASH"},
		{v, "-exit0", "failed", "AGENT_CRASH"},
		{v, "-errmsg", "failed", "GIT_CLONE_FAILED"},
	}
	for _, tc := range cases {
		dt := detail(t, tc.v, tc.frag)
		if dt.Status != tc.status || (tc.code != "" && !hasCode(dt, tc.code)) {
			t.Errorf("%s: %s %v, want %s %s", tc.frag, dt.Status, dt.Errors, tc.status, tc.code)
		}
	}
	dt := detail(t, v, "-bad")
	var reasons []string
	for _, r := range readJournal(t, repo, v.State.SwarmID, dt.Name) {
		switch {
		case !r.Valid:
			reasons = append(reasons, "invalid: "+r.Reason)
		case r.Rejected != "":
			reasons = append(reasons, "rejected: "+r.Rejected)
		}
	}
	if len(reasons) != 5 {
		t.Errorf("want 5 bad lines with reasons (not JSON, oversized, invalid message, unknown story, bad transition), got %d:\n%s", len(reasons), strings.Join(reasons, "\n"))
	}
	for _, r := range reasons {
		if strings.HasSuffix(r, ": ") {
			t.Errorf("bad line without a reason: %q", r)
		}
	}
}

func TestRealStopMidSwarm(t *testing.T) {
	t.Parallel()
	d, labels := realEngine(t)
	names := uniqueNames(labels, "trap", "stubborn", "waiting")
	repo, files := testRepo(t, names, 1)
	env := map[string]string{
		scriptKey(files[0]): "trap;progress|US-001|in_progress|go;sleep|60s",
		scriptKey(files[1]): "ignoreterm;progress|US-001|in_progress|go;sleep|60s",
		scriptKey(files[2]): "auto|1",
	}
	m := realManager(t, d, labels, Config{RunnerEnv: env, StopGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 2}); err != nil {
		t.Fatal(err)
	}
	// Both running ones have reported in_progress.
	for {
		v, err := m.Status(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		if detail(t, v, "-trap").LastOutput != "" && detail(t, v, "-stubborn").LastOutput != "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("containers did not report: %s", describe(v))
		case <-time.After(50 * time.Millisecond):
		}
	}
	v, err := m.Stop(ctx, repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"-trap", "-stubborn", "-waiting"} {
		if dt := detail(t, v, frag); dt.Status != "stopped" {
			t.Errorf("%s: %s %v, want stopped", frag, dt.Status, dt.Errors)
		}
	}
	// The trapping runner sent its own completion (exit 0); the stubborn
	// one was killed after the grace.
	if dt := detail(t, v, "-trap"); dt.ExitCode == nil || *dt.ExitCode != 0 {
		t.Errorf("trap exit code %v, want 0", ptrStr(dt.ExitCode))
	}
	if dt := detail(t, v, "-stubborn"); dt.ExitCode == nil || *dt.ExitCode != 137 {
		t.Errorf("stubborn exit code %v, want 137", ptrStr(dt.ExitCode))
	}
	validateStateFile(t, repo)
}

// childDaemon is the daemon the crash test kills: it starts the swarm the
// parent describes in its environment and runs until killed.
func childDaemon() int {
	ctx := context.Background()
	d, err := container.NewDocker(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STANDIN_SCRIPT") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	m, err := New(ctx, Config{Image: os.Getenv("ORCH_TEST_IMAGE"), RunnerEnv: env,
		Labels: map[string]string{dockertest.LabelKey: os.Getenv("ORCH_TEST_RUN")}}, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = m.Start(ctx, api.StartRequest{RepoPath: os.Getenv("ORCH_TEST_REPO"), TaskFiles: strings.Split(os.Getenv("ORCH_TEST_FILES"), ","), Max: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("started")
	select {}
}

// journalLines counts the records of every journal of the repo.
func journalLines(repo string) int {
	n := 0
	sw, err := state.Open(repo).Load(context.Background())
	if err != nil {
		return 0
	}
	for _, c := range sw.Containers {
		recs, _ := state.ReadJournal(state.Open(repo).JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: c.ContainerName}))
		n += len(recs)
	}
	return n
}

// stdoutLines counts the journaled stdout lines of the container whose
// name contains frag.
func stdoutLines(repo, frag string) int {
	sw, err := state.Open(repo).Load(context.Background())
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range sw.Containers {
		if !strings.Contains(c.ContainerName, frag) {
			continue
		}
		recs, _ := state.ReadJournal(state.Open(repo).JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: c.ContainerName}))
		for _, r := range recs {
			if r.Stream == state.StreamStdout {
				n++
			}
		}
	}
	return n
}

func TestRealCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, killAt := range []int{3, 25, 45} {
		t.Run(fmt.Sprintf("kill after %d journal records", killAt), func(t *testing.T) {
			t.Parallel()
			crashOnce(t, killAt)
		})
	}
}

// crashOnce runs a swarm in a child daemon, SIGKILLs it once the journals
// hold killAt records, waits until the containers have gone on (the short one
// finishes while no daemon runs), then recovers in a new Manager and checks
// that journals and state equal an uninterrupted run's.
func crashOnce(t *testing.T, killAt int) {
	d, labels := realEngine(t)
	names := uniqueNames(labels, "short", "long1", "long2", "queued")
	repo, files := testRepo(t, names, 10)
	cmd := startChildDaemon(t, labels, repo, files)
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	// The earliest kill is the one where "short" must finish while no
	// daemon runs, so it also waits until short has written a line: a kill
	// between journaling its task-request and writing it to the container's
	// stdin (seen under load) would leave short waiting for its request
	// until the recovery sends it.
	testwait.Eventually(t, 60*time.Second, fmt.Sprintf("the child daemon to journal %d records (and a line of %s)", killAt, names[0]), func() error {
		if j := journalLines(repo); j < killAt {
			return fmt.Errorf("%d records journaled", j)
		}
		if killAt <= 3 && stdoutLines(repo, names[0]) == 0 {
			return fmt.Errorf("no line of %s yet", names[0])
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	before := journalLines(repo)
	// Containers go on; "short" (10 stories at 10ms) finishes meanwhile:
	// after the earliest kill the test waits for that.
	st, err := state.Open(repo).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	short := st.Containers[0]
	waitWentOn(t, d, st)
	var info engine.Info
	for wait := time.Now().Add(30 * time.Second); ; {
		if info, err = d.Inspect(context.Background(), short.ContainerID); err != nil {
			t.Fatal(err)
		}
		if killAt > 3 || !info.Running || time.Now().After(wait) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	finishedWhileDown := !short.Status.Terminal() && !info.Running && info.Status == "exited"
	if killAt <= 3 && !finishedWhileDown {
		t.Errorf("the short container should have finished while no daemon ran (state %s, engine %s)", short.Status, info.Status)
	}

	m := realManager(t, d, labels, Config{MaxContainers: 2})
	if err := m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 90*time.Second)
	sw := validateStateFile(t, repo)
	t.Logf("killed at %d records (%d durable), recovered to %d; a container finished while down: %v", killAt, before, journalLines(repo), finishedWhileDown)
	checkUninterruptedJournals(t, repo, sw)
	_ = v
}

// startChildDaemon starts this test binary as a child daemon running a
// swarm of files in repo: the first container fast, the next two slow, the
// last between.
func startChildDaemon(t *testing.T, labels map[string]string, repo string, files []string) *exec.Cmd {
	t.Helper()
	scripts := map[string]string{
		scriptKey(files[0]): "pace|10ms;auto|10",
		scriptKey(files[1]): "pace|60ms;auto|10",
		scriptKey(files[2]): "pace|60ms;auto|10",
		scriptKey(files[3]): "pace|20ms;auto|10",
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ORCH_TEST_IMAGE="+standinImage, "ORCH_TEST_RUN="+labels[dockertest.LabelKey],
		"ORCH_TEST_REPO="+repo, "ORCH_TEST_FILES="+strings.Join(files, ","))
	for k, v := range scripts {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// checkUninterruptedJournals checks every container of sw completed its 10
// stories and journaled what an uninterrupted run journals.
func checkUninterruptedJournals(t *testing.T, repo string, sw *state.Swarm) {
	t.Helper()
	want := wantSignature(10)
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: 10, Completed: 10}) {
			t.Errorf("%s: %s %+v, want completed 10/10", c.ContainerName, c.Status, c.StoryProgress)
		}
		got := recordSignature(readJournal(t, repo, sw.SwarmID, c.ContainerName))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: journal differs from an uninterrupted run (%d records, want %d):\n%s", c.ContainerName, len(got), len(want), strings.Join(got, "\n"))
		}
	}
}

// waitWentOn waits until the containers have gone on while no daemon
// runs: one of them has written a line since the kill, or none runs.
func waitWentOn(t *testing.T, d engine.Engine, st *state.Swarm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A container that has written nothing may be waiting for its
	// task-request: the daemon journals a request before it writes it, and
	// a kill between the two leaves that container idle until the
	// recovery sends the request again. Only those that wrote can go on.
	atKill := map[string]int{}
	for _, c := range st.Containers {
		if c.ContainerID == "" {
			continue
		}
		if n := engineStdoutLines(ctx, d, c.ContainerID); n > 0 {
			atKill[c.ContainerID] = n
		}
	}
	for ctx.Err() == nil {
		running := 0
		for id, n := range atKill {
			if engineStdoutLines(ctx, d, id) > n {
				return
			}
			if info, err := d.Inspect(ctx, id); err == nil && info.Running {
				running++
			}
		}
		if running == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no container wrote a line or exited while no daemon ran")
}

// engineStdoutLines counts the stdout lines the engine holds for id.
func engineStdoutLines(ctx context.Context, d engine.Engine, id string) int {
	lines, err := d.Lines(ctx, id, logcursor.Position{}, false)
	if err != nil {
		return 0
	}
	n := 0
	for ln := range lines {
		if ln.Stream == engine.Stdout {
			n++
		}
	}
	return n
}

// wantSignature is the journal of an uninterrupted "auto|n" run.
func wantSignature(n int) []string {
	out := []string{"daemon:task-request"}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("US-%03d", i)
		out = append(out,
			fmt.Sprintf("progress-update|true||{StoryID:%s Status:in_progress Output:working on %s}", id, id),
			fmt.Sprintf("progress-update|true||{StoryID:%s Status:completed Output:done %s}", id, id))
	}
	return append(out, "completion|true||{Status:completed PRURL:<nil> Errors:[]}")
}
