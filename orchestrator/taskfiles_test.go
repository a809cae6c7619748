package orchestrator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoTaskFilesOnOneBranchAreRefused: two task files naming one branch
// are refused, in one start and when one is appended to a swarm that runs
// the other, naming the branch and both files; nothing is created.
func TestTwoTaskFilesOnOneBranchAreRefused(t *testing.T) {
	repo, files := testRepo(t, []string{"one", "two", "three"}, 1)
	// three names the branch of one.
	if err := os.WriteFile(filepath.Join(repo, files[2]), taskFileJSON("feat/one", 1), 0o644); err != nil {
		t.Fatal(err)
	}
	eng := newFakeEngine(byTask(nil, scripted(0, step{trap: true}, step{hang: true})))
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond})
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		var tfe *TaskFileError
		if !errors.As(err, &tfe) {
			t.Fatalf("%s: %v, want a TaskFileError", what, err)
		}
		for _, w := range []string{`"feat/one"`, files[0], files[2]} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", what, err, w)
			}
		}
	}
	_, err := m.Start(ctx, StartRequest{RepoPath: repo, TaskFiles: []string{files[0], files[2]}})
	check("start", err)
	if n := len(eng.ctrs); n != 0 {
		t.Fatalf("%d containers created", n)
	}
	if _, err := m.Start(ctx, StartRequest{RepoPath: repo, TaskFiles: files[:1]}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Start(ctx, StartRequest{RepoPath: repo, TaskFiles: files[1:], Append: true})
	check("append", err)
	eng.mu.Lock()
	n := len(eng.ctrs)
	eng.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d containers after a refused append, want 1", n)
	}
}
