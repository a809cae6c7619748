package orchestrator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// fakeWork is a hand-written ContainerWork: the branch tips containers
// hold and which of them origin has.
type fakeWork struct {
	mu       sync.Mutex
	tips     map[string]string // container -> branch tip
	onOrigin map[string]bool   // tip -> origin's branch holds it
	pushErr  error
	calls    []string // "keep NAME REF", "push REF BRANCH", "drop REF", in order
}

func (w *fakeWork) BranchTip(ctx context.Context, cb contract.ContainerBranch) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tips[cb.Container], nil
}

func (w *fakeWork) NamedByRef(ctx context.Context, repo, tip string) (bool, error) { return false, nil }

func (w *fakeWork) OnOrigin(ctx context.Context, cb contract.ContainerBranch, tip string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.onOrigin[tip], nil
}

func (w *fakeWork) Keep(ctx context.Context, cb contract.ContainerBranch, ref string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "keep "+cb.Container+" "+ref)
	return w.tips[cb.Container], nil
}

func (w *fakeWork) Push(ctx context.Context, cb contract.ContainerBranch, ref string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "push "+ref+" "+cb.Branch)
	return w.pushErr
}

func (w *fakeWork) Drop(ctx context.Context, repo, ref string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "drop "+ref)
	return nil
}

func (w *fakeWork) callsNow() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// committedThenFailed completes a story (so the runner committed) and then
// fails, as a run whose last push failed does.
var committedThenFailed = []step{{story: "US-001", status: "in_progress"}, {story: "US-001", status: "completed"}, {complete: "failed"}}

// failedOnce starts repo's task files, all of which fail, and returns the
// view once they are finished.
func failedOnce(t *testing.T, m *Manager, repo string, files []string, local bool) api.SwarmView {
	t.Helper()
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: local}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 10*time.Second)
	for _, d := range v.Containers {
		if d.Status != string(state.StatusFailed) {
			t.Fatalf("%s: %s, want failed", d.Name, d.Status)
		}
	}
	return v
}

// TestRemoteModeCleanupKeepsWorkOriginLacks: remote git mode, the
// container's branch tip is not on origin (its push was refused): cleanup
// without --force keeps it, the current swarm's and a replaced swarm's
// alike; once origin has the tip, cleanup removes it.
func TestRemoteModeCleanupKeepsWorkOriginLacks(t *testing.T) {
	repo, files := testRepo(t, []string{"rk1", "rk2"}, 1)
	eng := newFakeEngine(func(s engine.Spec) program { return scripted(0, committedThenFailed...) })
	work := &fakeWork{tips: map[string]string{"aimi-rk1": "1111", "aimi-rk2": "2222"}, onOrigin: map[string]bool{}}
	m := newTestManager(t, eng, Config{Work: work})
	ctx := context.Background()
	first := failedOnce(t, m, repo, files[:1], false)
	// A new swarm of the other task file replaces the first.
	failedOnce(t, m, repo, files[1:], false)
	rep, err := m.Cleanup(ctx, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, k := range rep.Kept {
		kept = append(kept, k.Name)
		if !strings.Contains(k.Reason, "aimi swarm fetch "+k.Name) || len(k.Commits) != 1 {
			t.Errorf("kept %s: %q %v, want the commit and how to fetch it", k.Name, k.Reason, k.Commits)
		}
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"aimi-rk1", "aimi-rk2"}) || len(rep.Removed) != 0 {
		t.Fatalf("cleanup report %+v, want both kept (origin has neither tip)", rep)
	}
	if _, err := eng.Inspect(ctx, first.Containers[0].ContainerID); err != nil {
		t.Fatalf("the replaced swarm's container went: %v", err)
	}
	work.mu.Lock()
	work.onOrigin["1111"], work.onOrigin["2222"] = true, true
	work.mu.Unlock()
	rep, err = m.Cleanup(ctx, repo, false)
	if err != nil || len(rep.Removed) != 2 || len(rep.Kept) != 0 {
		t.Fatalf("cleanup once origin has both = %+v, %v; want both removed", rep, err)
	}
}

// TestRemoteModeRerunPushesTheWorkFirstOrIsRefused: remote git mode, a
// failed container whose commits origin lacks. A rerun (resume
// --retry-failed, or a new start of the task file) first keeps them in the
// checkout and pushes them to origin; when the push fails, the rerun is
// refused with api.ErrUnreceivedWork naming the commit, the keep ref and
// aimi swarm fetch, and the container and the swarm stay as they were.
func TestRemoteModeRerunPushesTheWorkFirstOrIsRefused(t *testing.T) {
	for _, how := range []string{"resume", "start"} {
		t.Run(how, func(t *testing.T) {
			repo, files := testRepo(t, []string{"rr"}, 1)
			eng := newFakeEngine(func(s engine.Spec) program { return scripted(0, committedThenFailed...) })
			work := &fakeWork{tips: map[string]string{"aimi-rr": "abcd"}, onOrigin: map[string]bool{}, pushErr: errors.New("protected branch")}
			m := newTestManager(t, eng, Config{Work: work})
			ctx := context.Background()
			v := failedOnce(t, m, repo, files, false)
			old := v.Containers[0]
			rerun := func() error {
				if how == "resume" {
					_, err := m.Resume(ctx, repo, true)
					return err
				}
				_, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files})
				return err
			}
			err := rerun()
			ref := contract.KeptRef(contract.Sandbox{Swarm: v.State.SwarmID, Container: old.Name})
			if !errors.Is(err, api.ErrUnreceivedWork) || !strings.Contains(err.Error(), "abcd") || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "aimi swarm fetch "+old.Name) {
				t.Fatalf("rerun with the push refused = %v; want ErrUnreceivedWork naming the commit, %s and aimi swarm fetch", err, ref)
			}
			if _, err := eng.Inspect(ctx, old.ContainerID); err != nil {
				t.Fatalf("the container holding the work went: %v", err)
			}
			if sw := validateStateFile(t, repo); sw.SwarmID != v.State.SwarmID || sw.Containers[0].Status != state.StatusFailed {
				t.Fatalf("state after the refused rerun: %+v, want the failed swarm unchanged", sw)
			}
			work.mu.Lock()
			work.pushErr = nil
			work.mu.Unlock()
			if err := rerun(); err != nil {
				t.Fatalf("rerun once the push goes through: %v", err)
			}
			want := []string{"keep aimi-rr " + ref, "push " + ref + " feat/rr", "keep aimi-rr " + ref, "push " + ref + " feat/rr", "drop " + ref}
			if got := work.callsNow(); !slices.Equal(got, want) {
				t.Errorf("calls %q, want %q", got, want)
			}
			if _, err := eng.Inspect(ctx, old.ContainerID); err == nil {
				t.Error("the old container is still there after the rerun replaced it")
			}
		})
	}
}

// TestLocalModeRerunSalvagesFirstOrIsRefused: local git mode, a failed
// container holding commits the git service never received. Resume
// --retry-failed salvages them into the swarm's repository before the new
// container replaces the old one, and when salvaging fails it refuses and
// keeps the old container.
func TestLocalModeRerunSalvagesFirstOrIsRefused(t *testing.T) {
	repo, files := testRepo(t, []string{"ls"}, 1)
	eng := newFakeEngine(func(s engine.Spec) program { return scripted(0, committedThenFailed...) })
	var mu sync.Mutex
	var order []string
	eng.beforeCreate = func(ctx context.Context, name string) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, "create "+name)
		return nil
	}
	git := &fakeGit{}
	m := newTestManager(t, eng, Config{Git: git, Publisher: git, Work: &fakeWork{}})
	ctx := context.Background()
	v := failedOnce(t, m, repo, files, true)
	old := v.Containers[0]
	git.mu.Lock()
	git.unreceived = map[string][]string{old.Name: {"c0ffee"}}
	git.mu.Unlock()
	if _, err := m.Resume(ctx, repo, true); !errors.Is(err, api.ErrUnreceivedWork) || !strings.Contains(err.Error(), "c0ffee") {
		t.Fatalf("resume with the work not salvageable = %v, want ErrUnreceivedWork naming c0ffee", err)
	}
	if _, err := eng.Inspect(ctx, old.ContainerID); err != nil {
		t.Fatalf("the container holding the work went: %v", err)
	}
	git.mu.Lock()
	git.salvage = func(name string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, "salvage "+name)
		return "c0ffee", nil
	}
	git.mu.Unlock()
	if _, err := m.Resume(ctx, repo, true); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(order, "salvage "+old.Name); i < 0 || i != len(order)-2 || order[len(order)-1] != "create "+old.Name {
		t.Errorf("order %q, want the salvage right before the rerun's create", order)
	}
}

// TestRemoteModeFetchKeepsTheWorkAndPushesIt: aimi swarm fetch on a
// remote-mode container whose commits origin lacks keeps them in the
// checkout as its keep ref and pushes them; when the push fails the
// report names the ref and how to push it, and the ref stays.
func TestRemoteModeFetchKeepsTheWorkAndPushesIt(t *testing.T) {
	repo, files := testRepo(t, []string{"rf"}, 1)
	eng := newFakeEngine(func(s engine.Spec) program { return scripted(0, committedThenFailed...) })
	work := &fakeWork{tips: map[string]string{"aimi-rf": "feed"}, onOrigin: map[string]bool{}, pushErr: errors.New("protected branch")}
	m := newTestManager(t, eng, Config{Work: work})
	ctx := context.Background()
	v := failedOnce(t, m, repo, files, false)
	ref := contract.KeptRef(contract.Sandbox{Swarm: v.State.SwarmID, Container: "aimi-rf"})
	rep, err := m.Fetch(ctx, repo, nil)
	if err != nil || len(rep.Fetched) != 1 {
		t.Fatalf("fetch = %+v, %v; want the container fetched", rep, err)
	}
	if f := rep.Fetched[0]; f.Tip != "feed" || f.Ref != ref || !strings.Contains(f.Note, "git push origin "+ref+":refs/heads/feat/rf") {
		t.Fatalf("fetched %+v, want the tip kept as %s and how to push it", f, ref)
	}
	work.mu.Lock()
	work.pushErr = nil
	work.mu.Unlock()
	rep, err = m.Fetch(ctx, repo, []string{"aimi-rf"})
	if err != nil || len(rep.Fetched) != 1 || rep.Fetched[0].Ref != "" || !strings.Contains(rep.Fetched[0].Note, "pushed to origin") {
		t.Fatalf("fetch once origin accepts = %+v, %v; want pushed and the ref dropped", rep, err)
	}
	if got := work.callsNow(); got[len(got)-1] != "drop "+ref {
		t.Errorf("calls %q, want the keep ref dropped last", got)
	}
}
