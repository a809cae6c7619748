package orchestrator

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// A local start asks the git service for the repository's copy while it
// reads the task files: before the first grant, and even when a task file
// then refuses the start, which forgets the copy again.
func TestLocalStartPreparesTheRepositoryWhileItReadsTheTaskFiles(t *testing.T) {
	t.Parallel()
	repo, files := testRepo(t, []string{"ps1", "ps2"}, 1)
	eng := newFakeEngine(nil)
	eng.programs = func(engine.Spec) program { return scripted(0, storiesDone(1)...) }
	git := &fakeGit{}
	m := newTestManager(t, eng, Config{Git: git, Publisher: git})
	ctx := context.Background()

	_, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: []string{".aimi/tasks/missing-tasks.json"}, Local: true})
	if err == nil {
		t.Fatal("a start of a task file that does not exist was accepted")
	}
	git.mu.Lock()
	refused := slices.Clone(git.prepared)
	forgot := slices.Clone(git.forgotten)
	git.mu.Unlock()
	if len(refused) != 1 {
		t.Fatalf("the refused start prepared %v, want one copy made while its task files were read", refused)
	}
	if !slices.Equal(forgot, refused) {
		t.Errorf("the refused start forgot %v, want the copy it prepared %v", forgot, refused)
	}

	v, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, m, repo, 10*time.Second)
	git.mu.Lock()
	defer git.mu.Unlock()
	if got := git.prepared[1:]; !slices.Equal(got, []string{v.State.SwarmID}) {
		t.Errorf("the start prepared %v, want its swarm %s once", got, v.State.SwarmID)
	}
	for name, first := range git.preparedFirst {
		if !first {
			t.Errorf("%s was granted before its swarm's repository was prepared", name)
		}
	}
	if len(git.preparedFirst) != 2 {
		t.Errorf("%d grants, want 2", len(git.preparedFirst))
	}
	if slices.Contains(git.forgotten, v.State.SwarmID) {
		t.Errorf("the started swarm's repository was forgotten")
	}
}

// A local start that fails after its state file was opened (the git
// service cannot copy the repository, or the engine refuses a create)
// leaves nothing behind: no network, no copy of the repository and no
// state file of a swarm without containers.
func TestAStartThatFailsAfterItsStateWasOpenedLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(*fakeEngine, *fakeGit)
	}{
		{"the copy fails", func(_ *fakeEngine, g *fakeGit) { g.prepareErr = errors.New("clone: disk full") }},
		{"a create fails", func(e *fakeEngine, _ *fakeGit) {
			e.beforeCreate = func(context.Context, string) error { return errors.New("create: no space left") }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo, files := testRepo(t, []string{"lf1", "lf2"}, 1)
			eng := newFakeEngine(func(engine.Spec) program { return scripted(0, storiesDone(1)...) })
			git := &fakeGit{}
			tc.spoil(eng, git)
			m := newTestManager(t, eng, Config{Git: git, Publisher: git})
			if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err == nil {
				t.Fatal("the start succeeded")
			}
			git.mu.Lock()
			prepared, forgot := slices.Clone(git.prepared), slices.Clone(git.forgotten)
			git.mu.Unlock()
			if len(prepared) != 1 || !slices.Equal(forgot, prepared) {
				t.Errorf("the failed start prepared %v and forgot %v, want the one copy forgotten", prepared, forgot)
			}
			eng.mu.Lock()
			nets := len(eng.nets)
			eng.mu.Unlock()
			if nets != 0 {
				t.Errorf("%d networks stay after the failed start", nets)
			}
			if _, err := os.Stat(state.Open(repo).Path()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the failed start's state file stays (%v)", err)
			}
		})
	}
}
