package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// crash simulates the daemon's death: the Manager's context is cancelled
// without Shutdown, its supervisors end, and its recorders stop (what they
// had accepted is written, as a killed process's page cache would be; the
// real-engine test kills a process and loses the unflushed buffer too).
func crash(t *testing.T, m *Manager, cancel context.CancelFunc) {
	t.Helper()
	cancel()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sw := range m.swarms {
		_ = sw.led.close(context.Background())
	}
	m.closing = true
}

// recordSignature is a journal reduced to what must not change between an
// interrupted and an uninterrupted run: every container line in order.
func recordSignature(recs []state.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Stream == state.StreamDaemon {
			out = append(out, "daemon:"+r.Type)
			continue
		}
		m, _ := r.DecodeMessage()
		s := fmt.Sprintf("%s|%v|%s", r.Type, r.Valid, r.Rejected)
		if m != nil {
			s += "|" + fmt.Sprint(describePayload(m.Payload))
		} else {
			s += "|" + r.Raw
		}
		out = append(out, s)
	}
	return out
}

func describePayload(p any) string {
	return strings.TrimPrefix(fmt.Sprintf("%+v", p), "&")
}

func TestCrashRecoveryLosesNothingAndCountsNothingTwice(t *testing.T) {
	const stories = 15
	prog := scripted(2*time.Millisecond, storiesDone(stories)...)
	names := []string{"r1", "r2", "r3", "r4"}

	// The uninterrupted run, for comparison.
	refRepo, refFiles := testRepo(t, names, stories)
	refEng := newFakeEngine(byTask(nil, prog))
	refM := newTestManager(t, refEng, Config{MaxContainers: 2})
	if _, err := refM.Start(context.Background(), api.StartRequest{RepoPath: refRepo, TaskFiles: refFiles}); err != nil {
		t.Fatal(err)
	}
	ref := waitTerminal(t, refM, refRepo, 20*time.Second)
	refSigs := map[string][]string{}
	for _, c := range ref.Containers {
		refSigs[c.TaskFile] = recordSignature(readJournal(t, refRepo, ref.State.SwarmID, c.Name))
	}

	// The kill points are output lines the containers have written (of
	// 4*(2*stories+1)): before any, at the first story, mid-run and near
	// the end.
	for _, killAfter := range []int{0, 1, 20, 60, 110} {
		t.Run(fmt.Sprintf("kill after %d lines", killAfter), func(t *testing.T) {
			repo, files := testRepo(t, names, stories)
			eng := newFakeEngine(byTask(nil, prog))
			ctx1, cancel1 := context.WithCancel(context.Background())
			m1, err := New(ctx1, Config{Image: "standin:test", MaxContainers: 2, Logger: testLogger(t)}, eng)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
				t.Fatal(err)
			}
			if !waitUntil(10*time.Second, func() bool { return eng.linesEmitted() >= killAfter }) {
				t.Fatalf("the containers wrote %d lines, want %d before the kill", eng.linesEmitted(), killAfter)
			}
			crash(t, m1, cancel1)
			// Containers go on (and some finish) while no daemon runs: a
			// few lines no daemon reads, or every one that can go on
			// exits. One started just before the kill may still wait for
			// its task-request and write nothing until a daemon sends it.
			atCrash := eng.linesEmitted()
			if !waitUntil(10*time.Second, func() bool { return eng.linesEmitted() >= atCrash+5 || !eng.anyRunningWithRequest() }) {
				t.Fatalf("the containers made no progress while no daemon ran (%d lines)", eng.linesEmitted())
			}

			m2 := newTestManager(t, eng, Config{MaxContainers: 2})
			if err := m2.Recover(context.Background()); err != nil {
				t.Fatal(err)
			}
			v := waitTerminal(t, m2, repo, 20*time.Second)
			if _, peak := eng.counters(); peak > 2 {
				t.Errorf("peak running %d > 2", peak)
			}
			sw := validateStateFile(t, repo)
			for _, c := range sw.Containers {
				if c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: stories, Completed: stories}) {
					t.Errorf("%s: %s %+v, want completed %d/%d", c.ContainerName, c.Status, c.StoryProgress, stories, stories)
				}
			}
			for _, c := range v.Containers {
				got := recordSignature(readJournal(t, repo, v.State.SwarmID, c.Name))
				want := refSigs[c.TaskFile]
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s: journal differs from the uninterrupted run:\n got %d records\nwant %d records\n got: %q\nwant: %q", c.Name, len(got), len(want), got, want)
				}
			}
		})
	}
}

// dieAtTheRequest runs one container of three stories under a daemon that
// dies where die (given the engine and the daemon's cancel) makes it die
// around the task-request's write; while no daemon runs it polls between
// (which may change the engine) until that says the recovery may begin,
// recovers under a new daemon, and returns the container's journal (as
// recordSignature) and its view.
func dieAtTheRequest(t *testing.T, die func(*fakeEngine, context.CancelFunc), between func(*fakeEngine) bool) ([]string, api.ContainerDetail) {
	t.Helper()
	repo, files := testRepo(t, []string{"r1"}, 3)
	eng := newFakeEngine(byTask(nil, scripted(time.Millisecond, storiesDone(3)...)))
	ctx1, cancel1 := context.WithCancel(context.Background())
	die(eng, cancel1)
	m1, err := New(ctx1, Config{Image: "standin:test", MaxContainers: 1, Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	<-ctx1.Done()
	crash(t, m1, cancel1)
	if !waitUntil(10*time.Second, func() bool { return between(eng) }) {
		t.Fatal("the engine never got ready for the recovery")
	}
	m2 := newTestManager(t, eng, Config{MaxContainers: 1})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m2, repo, 20*time.Second)
	return recordSignature(readJournal(t, repo, v.State.SwarmID, v.Containers[0].Name)), v.Containers[0]
}

// requestOnceAndFirst reports whether a journal holds the task-request
// once, as its first record.
func requestOnceAndFirst(sig []string) bool {
	n := 0
	for _, r := range sig {
		if r == "daemon:task-request" {
			n++
		}
	}
	return len(sig) > 0 && sig[0] == "daemon:task-request" && n == 1
}

// A daemon that dies the moment a container got its task-request, before
// it did anything else: the container runs to its end while no daemon
// runs, and the recovered journal holds the request, once and first, as
// an uninterrupted run's does.
func TestCrashRightAfterTheRequestKeepsItInTheJournal(t *testing.T) {
	got, _ := dieAtTheRequest(t, func(eng *fakeEngine, cancel context.CancelFunc) {
		var once sync.Once
		eng.afterStdin = func(string) { once.Do(cancel) } // the daemon dies here
	}, func(eng *fakeEngine) bool { return eng.runningNow() == 0 }) // ran to its end meanwhile
	if !requestOnceAndFirst(got) {
		t.Errorf("journal after the crash: want the task-request once and first, got %q", got)
	}
}

// A daemon that dies after it journaled a task-request and before the
// container got it: the recovered daemon writes it again (and does not
// journal it twice), so the container does not wait for it forever.
func TestCrashBeforeTheRequestArrivedSendsItAgain(t *testing.T) {
	got, c := dieAtTheRequest(t, func(eng *fakeEngine, cancel context.CancelFunc) {
		eng.stdinFails = "r1" // the write never happens: the daemon dies first
		eng.beforeStdin = func(string) { cancel() }
	}, func(eng *fakeEngine) bool {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		eng.stdinFails, eng.beforeStdin = "", nil
		return true
	})
	if c.Status != string(state.StatusCompleted) {
		t.Fatalf("%s ended %s, want completed", c.Name, c.Status)
	}
	if !requestOnceAndFirst(got) {
		t.Errorf("journal after the crash: want the task-request once and first, got %q", got)
	}
}

func TestRecoverReconcilesTheTable(t *testing.T) {
	// Each container's fate while the daemon is down.
	progs := map[string]program{
		"runs-on":    scripted(5*time.Millisecond, storiesDone(4)...),
		"exits-ok":   scripted(0, storiesDone(1)...),
		"exits-bad":  scripted(0, step{story: "US-001", status: "in_progress"}, exitStep(2)),
		"vanishes":   scripted(0, step{hang: true}),
		"still-pend": scripted(0, storiesDone(1)...),
	}
	names := []string{"runs-on", "exits-ok", "exits-bad", "vanishes", "still-pend"}
	repo, files := testRepo(t, names, 1)
	// runs-on has 4 stories
	if err := os.WriteFile(filepath.Join(repo, files[0]), taskFileJSON("feat/runs-on", 4), 0o644); err != nil {
		t.Fatal(err)
	}
	commitTasks(t, repo)
	eng := newFakeEngine(byTask(progs, nil))
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", MaxContainers: 4, Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	// Let the first four start, then the daemon dies at once. The two that
	// exit while no daemon runs can do so only with their task-request: a
	// crash between a start and its request would leave them waiting for
	// the next daemon's (a count of requests could count still-pend's,
	// started after exits-ok, instead).
	if !waitUntil(5*time.Second, func() bool {
		st, _ := eng.counters()
		return st >= 4 && eng.fedOf("exits-ok") && eng.fedOf("exits-bad")
	}) {
		st, _ := eng.counters()
		t.Fatalf("%d containers started, exits-ok and exits-bad given their requests: %v %v; want 4 and both",
			st, eng.fedOf("exits-ok"), eng.fedOf("exits-bad"))
	}
	crash(t, m1, cancel1)
	vanish := detail(t, v, "vanishes")
	_ = eng.Remove(context.Background(), vanish.ContainerID)
	// The two that exit do so while no daemon runs.
	for _, frag := range []string{"exits-ok", "exits-bad"} {
		if !waitUntil(5*time.Second, func() bool { return eng.statusOf(frag) == "exited" }) {
			t.Fatalf("%s is %q, want exited before the recovery", frag, eng.statusOf(frag))
		}
	}

	m2 := newTestManager(t, eng, Config{MaxContainers: 4})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	v = waitTerminal(t, m2, repo, 20*time.Second)
	validateStateFile(t, repo)
	want := map[string]string{"runs-on": "completed", "exits-ok": "completed", "exits-bad": "failed", "vanishes": "failed", "still-pend": "completed"}
	for frag, st := range want {
		if d := detail(t, v, frag); d.Status != st {
			t.Errorf("%s: %s, want %s (%v)", frag, d.Status, st, d.Errors)
		}
	}
	if d := detail(t, v, "vanishes"); !hasCode(d, CodeContainerLost) {
		t.Errorf("vanished container errors %v lack %s", d.Errors, CodeContainerLost)
	}
	if d := detail(t, v, "exits-bad"); !hasCode(d, "AGENT_CRASH") {
		t.Errorf("crashed container errors %v lack AGENT_CRASH", d.Errors)
	}
}

func TestResumeRetryFailedAndCleanup(t *testing.T) {
	attempt := map[string]int{} // guarded by eng.mu: programs is called under it
	repo, files := testRepo(t, []string{"flaky", "fine"}, 2)
	eng := newFakeEngine(nil)
	eng.programs = func(s engine.Spec) program {
		tf := s.Labels[contract.LabelTaskFile]
		attempt[tf]++
		n := attempt[tf]
		if strings.Contains(tf, "flaky") && n == 1 {
			return scripted(0, step{story: "US-001", status: "in_progress"}, exitStep(1))
		}
		return scripted(0, storiesDone(2)...)
	}
	m := newTestManager(t, eng, Config{})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 10*time.Second)
	if d := detail(t, v, "flaky"); d.Status != "failed" {
		t.Fatalf("flaky: %s, want failed", d.Status)
	}
	old := detail(t, v, "flaky").ContainerID
	if _, err := m.Resume(ctx, repo, true); err != nil {
		t.Fatal(err)
	}
	v = waitTerminal(t, m, repo, 10*time.Second)
	d := detail(t, v, "flaky")
	if d.Status != "completed" || d.ContainerID == old {
		t.Fatalf("after retry: %s in %s, want completed in a new container", d.Status, d.ContainerID)
	}
	sw := validateStateFile(t, repo)
	if c := sw.Container(d.Name); c.ContainerID != d.ContainerID || c.StoryProgress.Completed != 2 {
		t.Errorf("state after retry: %+v", c)
	}
	if len(sw.Containers) != 2 {
		t.Errorf("%d entries after retry, want 2", len(sw.Containers))
	}

	rep, err := m.Cleanup(ctx, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 2 || !rep.StateRemoved {
		t.Errorf("cleanup report %+v, want 2 removed and the state gone", rep)
	}
	if len(eng.ctrs) != 0 {
		t.Errorf("%d containers left after cleanup", len(eng.ctrs))
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); !os.IsNotExist(err) {
		t.Errorf("state file still there: %v", err)
	}
	if _, err := m.Status(ctx, repo); err != api.ErrNoSwarm {
		t.Errorf("status after cleanup: %v, want api.ErrNoSwarm", err)
	}
}

func TestRecoverWithoutStateFileRebuildsFromLabels(t *testing.T) {
	repo, files := testRepo(t, []string{"lost1", "lost2"}, 5)
	eng := newFakeEngine(byTask(nil, scripted(10*time.Millisecond, storiesDone(5)...)))
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	// Both run and have reported a story when the daemon dies.
	if !waitUntil(5*time.Second, func() bool { return eng.linesEmitted() >= 4 }) {
		t.Fatalf("the containers wrote %d lines, want 4 before the kill", eng.linesEmitted())
	}
	crash(t, m1, cancel1)
	if err := os.Remove(filepath.Join(repo, ".aimi", "swarm-state.json")); err != nil {
		t.Fatal(err)
	}
	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m2, repo, 10*time.Second)
	sw := validateStateFile(t, repo)
	if len(sw.Containers) != 2 {
		t.Fatalf("%d entries rebuilt, want 2", len(sw.Containers))
	}
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress.Completed != 5 || !strings.HasPrefix(c.BranchName, "feat/lost") {
			t.Errorf("rebuilt %+v", c)
		}
		if recs := readJournal(t, repo, sw.SwarmID, c.ContainerName); len(recs) != 12 {
			t.Errorf("%s: %d journal records, want 12", c.ContainerName, len(recs))
		}
	}
}

func TestShutdownLeavesContainersRunningAndRecoverFinishesThem(t *testing.T) {
	repo, files := testRepo(t, []string{"sd1", "sd2"}, 10)
	eng := newFakeEngine(byTask(nil, scripted(10*time.Millisecond, storiesDone(10)...)))
	m1, err := New(context.Background(), Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	// acpPid is the runner's pid while it runs.
	testwait.Eventually(t, 5*time.Second, "a running container with an acpPid", func() error {
		v, _ = m1.Status(context.Background(), repo)
		if c := v.State.Containers[0]; c.Status != state.StatusRunning || c.ACPPID == nil {
			return fmt.Errorf("%+v", c)
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := eng.runningNow(); n == 0 {
		t.Fatal("Shutdown stopped the containers; they must keep running")
	}
	if _, err := m1.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); !errors.Is(err, api.ErrShutdown) {
		t.Errorf("start after shutdown: %v, want api.ErrShutdown", err)
	}
	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m2, repo, 10*time.Second)
	sw := validateStateFile(t, repo)
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress.Completed != 10 {
			t.Errorf("%s: %s %+v", c.ContainerName, c.Status, c.StoryProgress)
		}
		if recs := readJournal(t, repo, sw.SwarmID, c.ContainerName); len(recs) != 22 {
			t.Errorf("%s: %d records, want 22", c.ContainerName, len(recs))
		}
	}
}

// TestRetryFailedKeepsTheStoriesTheFirstRunFinished: a rerun's runner
// starts from the branch, where the first run's finished stories are
// marked so, and reports only the rest; its completion completed agrees
// with a fold that kept the finished stories, and the container completes.
func TestRetryFailedKeepsTheStoriesTheFirstRunFinished(t *testing.T) {
	attempt := map[string]int{} // guarded by eng.mu: programs is called under it
	repo, files := testRepo(t, []string{"half"}, 2)
	eng := newFakeEngine(nil)
	eng.programs = func(s engine.Spec) program {
		attempt[s.Labels[contract.LabelTaskFile]]++
		if attempt[s.Labels[contract.LabelTaskFile]] == 1 {
			return scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "completed"}, exitStep(1))
		}
		return scripted(0, step{story: "US-002", status: "in_progress"}, step{story: "US-002", status: "completed"}, step{complete: "completed"})
	}
	m := newTestManager(t, eng, Config{})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	if d := detail(t, waitTerminal(t, m, repo, 10*time.Second), "half"); d.Status != "failed" {
		t.Fatalf("first run: %s, want failed", d.Status)
	}
	if _, err := m.Resume(ctx, repo, true); err != nil {
		t.Fatal(err)
	}
	if d := detail(t, waitTerminal(t, m, repo, 10*time.Second), "half"); d.Status != "completed" {
		t.Fatalf("rerun: %s %+v, want completed", d.Status, d.Errors)
	}
	if c := validateStateFile(t, repo).Containers[0]; c.StoryProgress != (state.Progress{Total: 2, Completed: 2}) {
		t.Errorf("state after the rerun: %+v", c.StoryProgress)
	}
}

// A start replaces the repo's swarm; its journals are unreachable by logs
// from then on, so cleanup removes them with its containers, and keeps the
// current swarm's.
func TestCleanupRemovesTheJournalsOfReplacedSwarms(t *testing.T) {
	repo, files := testRepo(t, []string{"one"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	ctx := context.Background()
	first, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 10*time.Second)
	second, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 10*time.Second)
	journals := filepath.Join(repo, ".aimi", "swarm")
	for _, id := range []string{first.State.SwarmID, second.State.SwarmID} {
		if _, err := os.Stat(filepath.Join(journals, id)); err != nil {
			t.Fatalf("journals of swarm %s before cleanup: %v", id, err)
		}
	}
	if _, err := m.Cleanup(ctx, repo, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(journals, first.State.SwarmID)); !os.IsNotExist(err) {
		t.Errorf("journals of the replaced swarm still there after cleanup (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(journals, second.State.SwarmID)); err != nil {
		t.Errorf("journals of the current swarm: %v", err)
	}
}

// TestRerunRestoredAfterACrashKeepsTheStoriesItsFirstRunFinished: the
// daemon dies while a rerun works; the restored fold starts, as the rerun's
// did, with the stories the first run finished, so the rerun's completion
// is believed.
func TestRerunRestoredAfterACrashKeepsTheStoriesItsFirstRunFinished(t *testing.T) {
	attempt := map[string]int{} // guarded by eng.mu: programs is called under it
	repo, files := testRepo(t, []string{"again"}, 2)
	eng := newFakeEngine(nil)
	eng.programs = func(s engine.Spec) program {
		attempt[s.Labels[contract.LabelTaskFile]]++
		if attempt[s.Labels[contract.LabelTaskFile]] == 1 {
			return scripted(0, step{story: "US-001", status: "in_progress"}, step{story: "US-001", status: "completed"}, exitStep(1))
		}
		return scripted(0, step{story: "US-002", status: "in_progress"}, step{sleep: 500 * time.Millisecond},
			step{story: "US-002", status: "completed"}, step{complete: "completed"})
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m1.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m1, repo, 10*time.Second)
	if _, err := m1.Resume(ctx, repo, true); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the rerun to report US-002 in progress", func() error {
		v, err := m1.Status(ctx, repo)
		if err == nil && v.State.Containers[0].StoryProgress.InProgress != 1 {
			err = fmt.Errorf("progress %+v", v.State.Containers[0].StoryProgress)
		}
		return err
	}, testwait.Every(5*time.Millisecond))
	crash(t, m1, cancel1)
	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if d := detail(t, waitTerminal(t, m2, repo, 10*time.Second), "again"); d.Status != "completed" {
		t.Fatalf("rerun after the restart: %s %+v, want completed", d.Status, d.Errors)
	}
	if c := validateStateFile(t, repo).Containers[0]; c.StoryProgress != (state.Progress{Total: 2, Completed: 2}) {
		t.Errorf("state: %+v", c.StoryProgress)
	}
}
