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

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// savedEntry reports whether the state file on disk has an entry with
// container id id (the check every Start must pass).
func savedEntry(repo, id string) bool {
	b, err := os.ReadFile(filepath.Join(repo, ".aimi", "swarm-state.json"))
	if err != nil {
		return false
	}
	sw, err := state.Decode(b)
	if err != nil {
		return false
	}
	for _, c := range sw.Containers {
		if c.ContainerID == id {
			return true
		}
	}
	return false
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func TestEachContainerStartsAsSoonAsItExists(t *testing.T) {
	repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
	release := make(chan struct{})
	eng.beforeCreate = func(ctx context.Context, name string) error {
		if strings.Contains(name, "-a") {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var mu sync.Mutex
	var unsaved []string
	eng.beforeStart = func(id string) {
		if !savedEntry(repo, id) {
			mu.Lock()
			unsaved = append(unsaved, id)
			mu.Unlock()
		}
	}
	m := newTestManager(t, eng, Config{})
	type result struct {
		v   api.SwarmView
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files})
		res <- result{v, err}
	}()
	early := waitUntil(10*time.Second, func() bool { starts, _ := eng.counters(); return starts >= 1 })
	close(release)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !early {
		t.Fatal("no container started while the others were still being created")
	}
	waitTerminal(t, m, repo, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(unsaved) != 0 {
		t.Errorf("containers %v started before the state file held their entries", unsaved)
	}
	sw := validateStateFile(t, repo)
	var order []string
	for _, c := range sw.Containers {
		order = append(order, c.TaskFilePath)
		if c.Status != state.StatusCompleted {
			t.Errorf("%s: %s", c.ContainerName, c.Status)
		}
	}
	if strings.Join(order, " ") != strings.Join(files, " ") {
		t.Errorf("state entries in order %v, want task-file order %v", order, files)
	}
}

func TestFailedCreateAfterAnEarlyStartLeavesNothing(t *testing.T) {
	repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
	// a runs until it is killed: a Start that fails must not leave it.
	eng := newFakeEngine(byTask(nil, func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
		select {
		case <-ctx.Done():
		case <-term:
		}
		return 143, false
	}))
	refused := errors.New("the engine refused")
	eng.beforeCreate = func(ctx context.Context, name string) error {
		switch {
		case strings.Contains(name, "-a"):
			return nil
		case strings.Contains(name, "-b"):
			waitUntil(10*time.Second, func() bool { return eng.runningNow() >= 1 })
			return refused
		}
		<-ctx.Done() // c is still being created when b fails
		return ctx.Err()
	}
	m := newTestManager(t, eng, Config{})
	_, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files})
	if !errors.Is(err, refused) {
		t.Fatalf("Start: %v, want the create's error", err)
	}
	if starts, _ := eng.counters(); starts != 1 {
		t.Fatalf("%d containers started before the failure, want a alone (the case under test)", starts)
	}
	eng.mu.Lock()
	left, running := len(eng.ctrs), eng.running
	eng.mu.Unlock()
	if left != 0 || running != 0 {
		t.Errorf("a failed start left %d containers (%d running)", left, running)
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed start left its state file: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(repo, ".aimi", "swarm"))
	if len(ents) != 0 {
		t.Errorf("a failed start left journals: %v", ents)
	}
	if _, err := m.Status(context.Background(), repo); !errors.Is(err, api.ErrNoSwarm) {
		t.Errorf("status after a failed start: %v, want no swarm", err)
	}
}

func TestCrashWhileAStartStillCreatesRecoversWhatStarted(t *testing.T) {
	const stories = 3
	repo, files := testRepo(t, []string{"a", "b"}, stories)
	eng := newFakeEngine(byTask(nil, scripted(20*time.Millisecond, storiesDone(stories)...)))
	// b's create never returns while the first daemon lives: it dies in
	// the middle of its start, after a started.
	gone := make(chan struct{})
	t.Cleanup(func() { close(gone) })
	eng.beforeCreate = func(ctx context.Context, name string) error {
		if strings.Contains(name, "-b") {
			<-gone
			return errors.New("the daemon is gone")
		}
		return nil
	}
	var mu sync.Mutex
	var unsaved []string
	eng.beforeStart = func(id string) {
		if !savedEntry(repo, id) {
			mu.Lock()
			unsaved = append(unsaved, id)
			mu.Unlock()
		}
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	go m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}) //nolint:errcheck // it never returns before the crash
	if !waitUntil(10*time.Second, func() bool { return eng.runningNow() >= 1 }) {
		t.Fatal("a never started while b was being created")
	}
	crash(t, m1, cancel1)

	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m2, repo, 20*time.Second)
	sw := validateStateFile(t, repo)
	if len(sw.Containers) != 1 || !strings.Contains(sw.Containers[0].TaskFilePath, "a-tasks") {
		t.Fatalf("state after recovery: %s, want a alone (b was never created)", describe(v))
	}
	c := sw.Containers[0]
	if c.Status != state.StatusCompleted || c.StoryProgress != (state.Progress{Total: stories, Completed: stories}) {
		t.Errorf("%s: %s %+v, want completed %d/%d", c.ContainerName, c.Status, c.StoryProgress, stories, stories)
	}
	var want []string
	want = append(want, "daemon:task-request")
	for i := 1; i <= stories; i++ {
		want = append(want, fmt.Sprintf("US-%03d:in_progress", i), fmt.Sprintf("US-%03d:completed", i))
	}
	want = append(want, "completion:completed")
	var got []string
	for _, r := range readJournal(t, repo, sw.SwarmID, c.ContainerName) {
		if r.Stream == state.StreamDaemon {
			got = append(got, "daemon:"+r.Type)
			continue
		}
		m, _ := r.DecodeMessage()
		switch p := m.Payload.(type) {
		case *acpmsg.ProgressUpdate:
			got = append(got, p.StoryID+":"+p.Status)
		case *acpmsg.Completion:
			got = append(got, "completion:"+p.Status)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("journal of %s:\n got %v\nwant %v", c.ContainerName, got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(unsaved) != 0 {
		t.Errorf("containers %v started before the state file held their entries", unsaved)
	}
}
