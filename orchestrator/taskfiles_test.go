package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
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
	commitTasks(t, repo)
	eng := newFakeEngine(byTask(nil, scripted(0, step{trap: true}, step{hang: true})))
	m := newTestManager(t, eng, Config{StopGrace: 100 * time.Millisecond})
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		var tfe *api.TaskFileError
		if !errors.As(err, &tfe) {
			t.Fatalf("%s: %v, want a api.TaskFileError", what, err)
		}
		for _, w := range []string{`"feat/one"`, files[0], files[2]} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", what, err, w)
			}
		}
	}
	_, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: []string{files[0], files[2]}})
	check("start", err)
	if n := len(eng.ctrs); n != 0 {
		t.Fatalf("%d containers created", n)
	}
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[:1]}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files[1:], Append: true})
	check("append", err)
	eng.mu.Lock()
	n := len(eng.ctrs)
	eng.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d containers after a refused append, want 1", n)
	}
}

// gitIn runs git in repo with a test identity.
func gitIn(t testing.TB, repo string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestStartRunsTheCommittedCopy: the daemon validates and counts the task
// file the container will read (committed on the branch when it exists,
// else where the clone starts), refusing a working-tree copy that is not
// committed or differs, and saying how to fix it.
func TestStartRunsTheCommittedCopy(t *testing.T) {
	completed := func(branch string, n int) []byte {
		return bytes.ReplaceAll(taskFileJSON(branch, n), []byte(`"status": "pending"`), []byte(`"status": "completed"`))
	}
	for _, tc := range []struct {
		name  string
		local bool
		setup func(t *testing.T, repo, file string)
		want  string // substring of the refusal; "" means started
		done  int    // stories completed in the started container's progress
	}{
		{"an untracked task file is refused", false, func(t *testing.T, repo, file string) {
			os.WriteFile(filepath.Join(repo, ".aimi/tasks/new-tasks.json"), taskFileJSON("feat/new", 3), 0o644)
		}, "is not committed on HEAD", 0},
		{"a changed task file is refused before its branch exists", true, func(t *testing.T, repo, file string) {
			os.WriteFile(filepath.Join(repo, file), taskFileJSON("feat/x", 2), 0o644)
		}, "differs from the one committed on the checkout's HEAD", 0},
		{"a committed task file starts", true, func(t *testing.T, repo, file string) {}, "", 0},
		{"a rerun counts the branch's progress (local)", true, func(t *testing.T, repo, file string) {
			gitIn(t, repo, "checkout", "-q", "-b", "feat/x")
			os.WriteFile(filepath.Join(repo, file), completed("feat/x", 3), 0o644)
			gitIn(t, repo, "commit", "-q", "-am", "stories done")
			gitIn(t, repo, "checkout", "-q", "-")
		}, "", 3},
		{"a rerun counts origin's branch (remote)", false, func(t *testing.T, repo, file string) {
			gitIn(t, repo, "checkout", "-q", "-b", "feat/x")
			os.WriteFile(filepath.Join(repo, file), completed("feat/x", 3), 0o644)
			gitIn(t, repo, "commit", "-q", "-am", "stories done")
			gitIn(t, repo, "checkout", "-q", "-")
			gitIn(t, repo, "update-ref", "refs/remotes/origin/feat/x", "feat/x")
			gitIn(t, repo, "branch", "-q", "-D", "feat/x")
		}, "", 3},
		{"a branch with another plan is refused", true, func(t *testing.T, repo, file string) {
			gitIn(t, repo, "checkout", "-q", "-b", "feat/x")
			os.WriteFile(filepath.Join(repo, file), taskFileJSON("feat/x", 4), 0o644)
			gitIn(t, repo, "commit", "-q", "-am", "another plan")
			gitIn(t, repo, "checkout", "-q", "-")
		}, "differs from your working-tree copy in more than story statuses", 0},
		{"a committed symbolic link is refused", true, func(t *testing.T, repo, file string) {
			os.Rename(filepath.Join(repo, file), filepath.Join(repo, "real.json"))
			os.Symlink("../../real.json", filepath.Join(repo, file))
			gitIn(t, repo, "add", "-A")
			gitIn(t, repo, "commit", "-q", "-m", "link")
		}, "committed as a symbolic link", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, files := testRepo(t, []string{"x"}, 3)
			// testRepo names the branch feat/x.
			file := files[0]
			tc.setup(t, repo, file)
			if strings.HasPrefix(tc.name, "an untracked") {
				file = ".aimi/tasks/new-tasks.json"
			}
			eng := newFakeEngine(byTask(nil, scripted(0, step{hang: true})))
			cfg := Config{StopGrace: 100 * time.Millisecond}
			if tc.local {
				cfg.Git, cfg.Publisher = &fakeGit{}, &fakeGit{}
			}
			m := newTestManager(t, eng, cfg)
			v, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: []string{file}, Local: tc.local})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "commit") && !strings.Contains(err.Error(), "link") {
					t.Fatalf("start: %v, want a refusal with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			p := v.State.Containers[0].StoryProgress
			if p.Total != 3 || p.Completed != tc.done {
				t.Errorf("progress %+v, want %d of 3 completed", p, tc.done)
			}
		})
	}
}

// TestRecoveryKeepsTheCommittedCopysProgress: after a daemon restart, the
// adopted swarm still counts the branch's progress, not the working tree's.
func TestRecoveryKeepsTheCommittedCopysProgress(t *testing.T) {
	repo, files := testRepo(t, []string{"x"}, 3)
	gitIn(t, repo, "checkout", "-q", "-b", "feat/x")
	os.WriteFile(filepath.Join(repo, files[0]), bytes.ReplaceAll(taskFileJSON("feat/x", 3), []byte(`"status": "pending"`), []byte(`"status": "completed"`)), 0o644)
	gitIn(t, repo, "commit", "-q", "-am", "stories done")
	gitIn(t, repo, "checkout", "-q", "-")
	gitIn(t, repo, "update-ref", "refs/remotes/origin/feat/x", "feat/x")
	eng := newFakeEngine(byTask(nil, scripted(0, step{hang: true})))
	ctx1, cancel1 := context.WithCancel(context.Background())
	m1, err := New(ctx1, Config{Image: "standin:test", Logger: testLogger(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		t.Fatal(err)
	}
	crash(t, m1, cancel1)
	m2 := newTestManager(t, eng, Config{})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, err := m2.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if p := v.State.Containers[0].StoryProgress; p.Completed != 3 || p.Total != 3 {
		t.Errorf("progress after recovery %+v, want the branch's 3 of 3 completed", p)
	}
}

// TestStartSaysWhyGitHasNoCopy: a repository without commits, and a
// directory git does not read, each get their own reason.
func TestStartSaysWhyGitHasNoCopy(t *testing.T) {
	noCommit, noGit := t.TempDir(), t.TempDir()
	gitIn(t, noCommit, "init", "-q")
	for _, repo := range []string{noCommit, noGit} {
		os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
		os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "x-tasks.json"), taskFileJSON("feat/x", 1), 0o644)
	}
	m := newTestManager(t, newFakeEngine(byTask(nil, scripted(0, step{hang: true}))), Config{})
	for repo, want := range map[string]string{noCommit: "has no commit yet", noGit: "not a git repository"} {
		_, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: []string{".aimi/tasks/x-tasks.json"}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("start in %s: %v, want %q", repo, err, want)
		}
	}
}
