package orchestrator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// The containers of a fan-out are all started before any is given its
// work: the engine's starts are the fan-out's critical path, and the
// first containers' clones and agents would compete with them. The last
// container's start is held back here (a slow engine) until the others
// are started and everything else in the bubble is blocked (synctest):
// work that did not wait for the wave would have been written by then.
func TestWorkBeginsOnceTheStartWaveIsStarted(t *testing.T) {
	synctest.Test(t, testWorkBeginsOnceTheStartWaveIsStarted)
}

func testWorkBeginsOnceTheStartWaveIsStarted(t *testing.T) {
	repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	var mu sync.Mutex
	var order []string
	note := func(what, id string) {
		mu.Lock()
		defer mu.Unlock()
		c := eng.get(id)
		order = append(order, what+" "+c.spec.Name[len(c.spec.Name)-1:])
	}
	eng.beforeStart = func(id string) {
		eng.mu.Lock()
		slow := strings.HasSuffix(eng.get(id).spec.Name, "-c")
		eng.mu.Unlock()
		if slow {
			// The others are started, and as far as they go.
			waitUntil(10*time.Second, func() bool { s, _ := eng.counters(); return s >= 2 })
			synctest.Wait()
		}
	}
	eng.afterStart = func(id string) {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		note("start", id)
	}
	eng.beforeStdin = func(id string) {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		note("request", id)
	}
	m := newTestManager(t, eng, Config{})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	lastStart := slices.IndexFunc(order, func(s string) bool { return s == "start c" })
	firstRequest := slices.IndexFunc(order, func(s string) bool { return strings.HasPrefix(s, "request") })
	if lastStart < 0 || firstRequest < 0 || firstRequest < lastStart {
		t.Fatalf("a task-request was written before the wave's last start: %v", order)
	}
}

// Containers queued for a run slot are not part of the wave: with one slot
// for three task files, the first gets its work at once (were the queued
// ones counted, it would wait for starts that wait for its slot).
func TestQueuedContainersDoNotHoldTheWaveBack(t *testing.T) {
	repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	m := newTestManager(t, eng, Config{})
	start := time.Now()
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Max: 1}); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, waveMaxWait/2)
	if took := time.Since(start); took >= waveMaxWait/2 {
		t.Fatalf("three one-at-a-time containers took %v", took)
	}
}

func TestStartWaveWaitIsBounded(t *testing.T) {
	w := newStartWave()
	leave := w.join()
	defer leave()
	start := time.Now()
	w.wait(context.Background(), 50*time.Millisecond, false)
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("wait returned before its bound with a container still starting")
	}
	leave()
	leave() // a second call changes nothing
	done := make(chan struct{})
	go func() { w.wait(context.Background(), time.Hour, false); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return on an idle wave")
	}
}

// Each swarm has its own start wave: a container of one repository whose
// engine start is slow does not hold back the work of another repository's
// container, started meanwhile (a wave shared by every swarm held it until
// the slow start returned, up to waveMaxWait).
func TestSlowStartInOneRepositoryDoesNotHoldAnothersWork(t *testing.T) {
	slowRepo, slowFiles := testRepo(t, []string{"slow"}, 1)
	fastRepo, fastFiles := testRepo(t, []string{"fast"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	slowStarting, fastAsked := make(chan struct{}), make(chan struct{})
	var slowOnce, fastOnce sync.Once
	hold := waveMaxWait / 3
	eng.beforeStart = func(id string) {
		eng.mu.Lock()
		slow := strings.HasSuffix(eng.get(id).spec.Name, "-slow")
		eng.mu.Unlock()
		if !slow {
			return
		}
		slowOnce.Do(func() { close(slowStarting) })
		// Held until the other repository's container has its work, or
		// for a third of the wave's bound.
		select {
		case <-fastAsked:
		case <-time.After(hold):
		}
	}
	eng.beforeStdin = func(id string) {
		eng.mu.Lock()
		fast := strings.HasSuffix(eng.get(id).spec.Name, "-fast")
		eng.mu.Unlock()
		if fast {
			fastOnce.Do(func() { close(fastAsked) })
		}
	}
	m := newTestManager(t, eng, Config{})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: slowRepo, TaskFiles: slowFiles}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slowStarting:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow container was not started")
	}
	began := time.Now()
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: fastRepo, TaskFiles: fastFiles}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fastAsked:
	case <-time.After(hold + 5*time.Second):
		t.Fatal("the other repository's container never got its task-request")
	}
	if took := time.Since(began); took >= hold {
		t.Fatalf("the other repository's container got its work %v after its start, held back by the slow start (held %v)", took, hold)
	}
	waitTerminal(t, m, slowRepo, 20*time.Second)
	waitTerminal(t, m, fastRepo, 20*time.Second)
}
