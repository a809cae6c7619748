package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// newTestManager returns a Manager over a fake engine whose containers run
// the program chosen by their task-file label.
func newTestManager(t *testing.T, eng *fakeEngine, cfg Config) *Manager {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = "standin:test"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = m.Shutdown(sctx)
		cancel()
	})
	return m
}

// byTask picks a program by a fragment of the container's task file.
func byTask(progs map[string]program, def program) func(engine.Spec) program {
	return func(s engine.Spec) program {
		for frag, p := range progs {
			if strings.Contains(s.Labels[contract.LabelTaskFile], frag) {
				return p
			}
		}
		return def
	}
}

func TestSwarmOfSixWithMaxTwo(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	repo, files := testRepo(t, names, 3)
	eng := newFakeEngine(byTask(nil, scripted(2*time.Millisecond, storiesDone(3)...)))
	m := newTestManager(t, eng, Config{})
	v, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.State.Containers) != 6 {
		t.Fatalf("want 6 entries at start, got %d", len(v.State.Containers))
	}
	for _, c := range v.State.Containers {
		if c.ContainerID == "" {
			t.Errorf("%s has no container id at start", c.ContainerName)
		}
	}
	v = waitTerminal(t, m, repo, 20*time.Second)
	starts, peak := eng.counters()
	if peak > 2 {
		t.Errorf("peak running = %d, want <= 2", peak)
	}
	if starts != 6 {
		t.Errorf("starts = %d, want 6", starts)
	}
	sw := validateStateFile(t, repo)
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted {
			t.Errorf("%s: status %s, want completed", c.ContainerName, c.Status)
		}
		want := state.Progress{Total: 3, Completed: 3}
		if c.StoryProgress != want {
			t.Errorf("%s: progress %+v, want %+v", c.ContainerName, c.StoryProgress, want)
		}
		if c.ACPPID != nil {
			t.Errorf("%s: acpPid %d after exit, want null", c.ContainerName, *c.ACPPID)
		}
		recs := readJournal(t, repo, sw.SwarmID, c.ContainerName)
		// task-request + 6 progress + completion
		if len(recs) != 8 {
			t.Errorf("%s: %d journal records, want 8", c.ContainerName, len(recs))
		}
	}
}

func TestStartValidatesEveryTaskFileFirst(t *testing.T) {
	repo, files := testRepo(t, []string{"good"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	cases := []struct {
		name  string
		files []string
		want  []string
	}{
		{"absolute path is refused", []string{"/etc/passwd.json"}, []string{"absolute"}},
		{"dot-dot is refused", []string{".aimi/tasks/../x-tasks.json"}, []string{"'..'"}},
		{"outside the tasks dir is refused", []string{"tasks/x-tasks.json"}, []string{"not under .aimi/tasks/"}},
		{"wrong suffix is refused", []string{".aimi/tasks/x.yaml"}, []string{".json"}},
		{"missing file is refused", []string{".aimi/tasks/none-tasks.json"}, []string{"none-tasks.json"}},
		{"every bad file is listed, the good one too is not started", []string{files[0], "/abs.json", ".aimi/tasks/../y.json"}, []string{"/abs.json", "y.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: tc.files})
			var tfe *api.TaskFileError
			if !errors.As(err, &tfe) || !errors.Is(err, api.ErrInvalidRequest) {
				t.Fatalf("want *api.TaskFileError, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			eng.mu.Lock()
			defer eng.mu.Unlock()
			if n := len(eng.ctrs); n != 0 {
				t.Errorf("%d containers created, want 0", n)
			}
			// The network is made while the files are read; a refused
			// start removes it again.
			if n := len(eng.nets); n != 0 {
				t.Errorf("%d networks left, want 0", n)
			}
		})
	}
}

func TestOutcomes(t *testing.T) {
	progs := map[string]program{
		"crash":    scripted(0, step{story: "US-001", status: "in_progress"}, exitStep(3)),
		"oom":      scripted(0, step{story: "US-001", status: "in_progress"}, step{oom: true}),
		"timeout":  scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true}),
		"errmsg":   scripted(0, step{errCode: "GIT_CLONE_FAILED"}, exitStep(1)),
		"failmsg":  scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "failed"}, step{complete: "failed"}, exitStep(0)),
		"exit0":    scripted(0, step{story: "US-001", status: "in_progress"}, exitStep(0)),
		"msgwins":  scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "completed"}, step{complete: "completed"}, exitStep(9)),
		"badlines": scripted(0, step{raw: "npm WARN something"}, step{raw: `{"type":"progress-update"}`}, step{raw: strings.Repeat("x", 70000)}, step{story: "US-009", status: "in_progress"}, step{story: "US-001", status: "completed"}, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "completed"}, step{complete: "completed"}),
	}
	names := []string{"crash", "oom", "timeout", "errmsg", "failmsg", "exit0", "msgwins", "badlines"}
	repo, files := testRepo(t, names, 1)
	eng := newFakeEngine(byTask(progs, nil))
	m := newTestManager(t, eng, Config{Timeout: 300 * time.Millisecond, StopGrace: 50 * time.Millisecond, MaxContainers: 8})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 20*time.Second)
	validateStateFile(t, repo)
	cases := []struct {
		frag   string
		status string
		code   string
	}{
		{"crash", "failed", acpmsg.CodeAgentCrash},
		{"oom", "failed", acpmsg.CodeContainerOOM},
		{"timeout", "failed", acpmsg.CodeContainerTimeout},
		{"errmsg", "failed", "GIT_CLONE_FAILED"},
		{"failmsg", "failed", ""},
		{"exit0", "failed", acpmsg.CodeAgentCrash},
		{"msgwins", "completed", ""},
		{"badlines", "completed", ""},
	}
	for _, tc := range cases {
		t.Run(tc.frag, func(t *testing.T) {
			d := detail(t, v, tc.frag)
			if d.Status != tc.status {
				t.Errorf("status %s, want %s (%s)", d.Status, tc.status, describe(v))
			}
			if tc.code != "" && !hasCode(d, tc.code) {
				t.Errorf("errors %v lack %s", d.Errors, tc.code)
			}
			if tc.code == "" && len(d.Errors) > 0 && tc.status == "completed" {
				t.Errorf("unexpected errors %v", d.Errors)
			}
		})
	}
	t.Run("bad lines are journaled with reasons", func(t *testing.T) {
		d := detail(t, v, "badlines")
		recs := readJournal(t, repo, v.State.SwarmID, d.Name)
		var reasons []string
		for _, r := range recs {
			if !r.Valid {
				reasons = append(reasons, r.Reason)
			} else if r.Rejected != "" {
				reasons = append(reasons, r.Rejected)
			}
		}
		if len(reasons) != 5 {
			t.Fatalf("want 5 bad lines journaled (garbage, invalid, oversized, unknown story, bad transition), got %d: %q", len(reasons), reasons)
		}
		for i, r := range reasons {
			if r == "" {
				t.Errorf("bad line %d has no reason", i)
			}
		}
		if d.Rejected != 5 {
			t.Errorf("view says %d rejected, want 5", d.Rejected)
		}
	})
}

func TestTaskRequestThatCannotBeSentFailsTheContainer(t *testing.T) {
	repo, files := testRepo(t, []string{"nostdin", "fine"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	eng.stdinFails = "nostdin"
	m := newTestManager(t, eng, Config{StopGrace: 50 * time.Millisecond})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 10*time.Second)
	if d := detail(t, v, "nostdin"); d.Status != "failed" || !hasCode(d, CodeStartFailed) {
		t.Errorf("nostdin: %s %v, want failed with %s", d.Status, d.Errors, CodeStartFailed)
	}
	if d := detail(t, v, "fine"); d.Status != "completed" {
		t.Errorf("fine: %s, want completed", d.Status)
	}
}

func hasCode(d api.ContainerDetail, code string) bool {
	for _, e := range d.Errors {
		if e.Code == code {
			return true
		}
	}
	return false
}

func TestStop(t *testing.T) {
	progs := map[string]program{
		"trap":   scripted(0, step{trap: true}, step{story: "US-001", status: "in_progress"}, step{hang: true}),
		"ignore": scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true}),
	}
	repo, files := testRepo(t, []string{"trap", "ignore", "queued"}, 1)
	eng := newFakeEngine(byTask(progs, scripted(0, step{hang: true})))
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 2}); err != nil {
		t.Fatal(err)
	}
	// Running as the daemon sees it: a container shows running once its
	// task-request is journaled, which is after the engine's start and
	// before the request reaches it.
	if !waitUntil(10*time.Second, func() bool { return eng.fedOf("trap") && eng.fedOf("ignore") }) {
		t.Fatalf("the two first have their requests: trap %v, ignore %v; want both", eng.fedOf("trap"), eng.fedOf("ignore"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := m.Stop(ctx, repo, []string{detailName(t, m, repo, "trap")})
	if err != nil {
		t.Fatal(err)
	}
	if d := detail(t, v, "trap"); d.Status != "stopped" {
		t.Errorf("trapping container: %s, want stopped", d.Status)
	}
	if d := detail(t, v, "ignore"); d.Status != "running" {
		t.Errorf("other container: %s, want running", d.Status)
	}
	v, err = m.Stop(ctx, repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"trap", "ignore", "queued"} {
		if d := detail(t, v, frag); d.Status != "stopped" {
			t.Errorf("%s: %s, want stopped", frag, d.Status)
		}
	}
	if _, err := m.Stop(ctx, repo, []string{"aimi-nope"}); !errors.Is(err, api.ErrUnknownContainer) {
		t.Errorf("unknown name: %v, want api.ErrUnknownContainer", err)
	}
	validateStateFile(t, repo)
}

// A stop that the engine never answers returns within the grace plus
// StopWait with an error naming the container, and leaves it running.
func TestStopReturnsWhenTheEngineNeverAnswers(t *testing.T) {
	repo, files := testRepo(t, []string{"stuck"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true})))
	eng.stopHangs = make(chan struct{})
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond, StopWait: 300 * time.Millisecond})
	t.Cleanup(func() { close(eng.stopHangs) }) // before the manager's shutdown
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	// Running as the daemon sees it (its task-request journaled), not
	// only started.
	if !waitUntil(10*time.Second, func() bool { return eng.fedOf("stuck") }) {
		t.Fatal("the container has no task-request after 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	v, err := m.Stop(ctx, repo, nil)
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("stop = %v, want an error naming the container", err)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("stop took %s, want about grace+StopWait", took)
	}
	if d := detail(t, v, "stuck"); d.Status != "running" {
		t.Errorf("container %s, want still running", d.Status)
	}
}

func detailName(t *testing.T, m *Manager, repo, frag string) string {
	v, err := m.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	return detail(t, v, frag).Name
}

func TestActiveSwarmConflictAppendForce(t *testing.T) {
	repo, files := testRepo(t, []string{"one", "two", "three"}, 1)
	eng := newFakeEngine(byTask(map[string]program{"three": scripted(0, storiesDone(1)...)}, scripted(0, step{trap: true}, step{hang: true})))
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond})
	ctx := context.Background()
	v1, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[1:2]}); !errors.Is(err, api.ErrActiveSwarm) {
		t.Fatalf("second start: %v, want api.ErrActiveSwarm", err)
	}
	v2, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[1:2], Append: true})
	if err != nil {
		t.Fatal(err)
	}
	if v2.State.SwarmID != v1.State.SwarmID || len(v2.State.Containers) != 2 {
		t.Fatalf("append: swarm %s with %d containers, want %s with 2", v2.State.SwarmID, len(v2.State.Containers), v1.State.SwarmID)
	}
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[1:2], Append: true}); !errors.Is(err, api.ErrInvalidRequest) {
		t.Errorf("appending a task file twice: %v, want api.ErrInvalidRequest", err)
	}
	v3, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[2:], Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if v3.State.SwarmID == v1.State.SwarmID || len(v3.State.Containers) != 1 {
		t.Fatalf("force: want a new swarm with 1 container, got %s with %d", v3.State.SwarmID, len(v3.State.Containers))
	}
	// The replaced swarm's containers were stopped.
	for _, c := range eng.ctrs {
		if c.spec.Labels[contract.LabelSwarmID] == v1.State.SwarmID && c.status == "running" {
			t.Errorf("container %s of the replaced swarm still runs", c.spec.Name)
		}
	}
	waitTerminal(t, m, repo, 10*time.Second)
	validateStateFile(t, repo)
	rep, err := m.Cleanup(ctx, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 3 || !rep.StateRemoved {
		t.Errorf("cleanup %+v: want the new swarm's container and the replaced swarm's two removed", rep)
	}
	eng.mu.Lock()
	left := len(eng.ctrs)
	eng.mu.Unlock()
	if left != 0 {
		t.Errorf("%d containers left after cleanup", left)
	}
}

func TestEventsArePublished(t *testing.T) {
	repo, files := testRepo(t, []string{"ev"}, 2)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(2)...)))
	m := newTestManager(t, eng, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := m.Subscribe(ctx)
	var mu sync.Mutex
	var kinds []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range evs {
			mu.Lock()
			kinds = append(kinds, string(e.Kind)+":"+e.StoryID+":"+e.StoryStatus)
			mu.Unlock()
			if e.Kind == api.EventSwarmFinished {
				return
			}
		}
	}()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no swarm-finished event")
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(kinds, " ")
	for _, w := range []string{"swarm-started::", "container-created::", "container-started::", "progress:US-001:in_progress", "progress:US-002:completed", "progress::completed", "container-exited::", "swarm-finished::"} {
		if !strings.Contains(got, w) {
			t.Errorf("events %q lack %q", got, w)
		}
	}
}

// A container that fails mid-story says in its exit event which story it
// was on (a notice names it); one that completes names none.
func TestExitEventNamesTheStoryAFailureEndedOn(t *testing.T) {
	repo, files := testRepo(t, []string{"crash", "fine"}, 2)
	eng := newFakeEngine(byTask(map[string]program{
		"crash": scripted(0, step{story: "US-001", status: "completed"}, step{story: "US-002", status: "in_progress"}, exitStep(2)),
	}, scripted(0, storiesDone(2)...)))
	m := newTestManager(t, eng, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := m.Subscribe(ctx)
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	exits := map[string]api.Event{}
	deadline := time.After(10 * time.Second)
	for len(exits) < 2 {
		select {
		case e := <-evs:
			if e.Kind == api.EventContainerExited {
				exits[e.ContainerName] = e
			}
		case <-deadline:
			t.Fatalf("exit events: %+v", exits)
		}
	}
	for name, e := range exits {
		want := ""
		if strings.Contains(name, "crash") {
			want = "US-002"
		}
		if e.StoryID != want || e.StoryStatus != "" {
			t.Errorf("%s (%s): exit event story %q status %q, want story %q and no status", name, e.Status, e.StoryID, e.StoryStatus, want)
		}
	}
}

var _ = fmt.Sprint
