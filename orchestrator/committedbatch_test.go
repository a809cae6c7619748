package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// batchRepo makes a repository whose task files meet every case of
// loadAsRun, on branches that exist and branches that do not, in local
// and remote mode; it returns the repository and the task files (some
// named twice).
func batchRepo(t *testing.T) (string, []string) {
	t.Helper()
	names := []string{"same", "progress", "plan", "new", "changed", "link", "dir", "big", "sub", "bad", "rerun"}
	repo, files := testRepo(t, names, 3)
	file := func(n string) string { return ".aimi/tasks/" + n + "-tasks.json" }
	write := func(p string, data []byte) {
		t.Helper()
		os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onBranch := func(b string, change func()) {
		t.Helper()
		gitIn(t, repo, "checkout", "-q", "-b", b)
		change()
		gitIn(t, repo, "add", "-A")
		gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "on "+b)
		gitIn(t, repo, "checkout", "-q", "-f", "-")
		gitIn(t, repo, "update-ref", "refs/remotes/origin/"+b, b)
	}
	onBranch("feat/same", func() {})
	onBranch("feat/rerun", func() {})
	onBranch("feat/progress", func() {
		write(file("progress"), bytes.ReplaceAll(taskFileJSON("feat/progress", 3), []byte(`"status": "pending"`), []byte(`"status": "completed"`)))
	})
	onBranch("feat/plan", func() { write(file("plan"), taskFileJSON("feat/plan", 5)) })
	onBranch("feat/link", func() {
		os.Remove(filepath.Join(repo, file("link")))
		os.Symlink("../../README", filepath.Join(repo, file("link")))
	})
	onBranch("feat/dir", func() {
		os.Remove(filepath.Join(repo, file("dir")))
		write(file("dir")+"/inner", []byte("x"))
	})
	onBranch("feat/big", func() {
		write(file("big"), bytes.Repeat([]byte(" "), 4<<20+1))
	})
	// A submodule: git add would drop the gitlink, whose directory is not
	// there.
	head := strings.TrimSpace(gitOut(t, repo, "rev-parse", "HEAD"))
	gitIn(t, repo, "checkout", "-q", "-b", "feat/sub")
	gitIn(t, repo, "rm", "-q", "--cached", file("sub"))
	gitIn(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+head+","+file("sub"))
	gitIn(t, repo, "commit", "-q", "-m", "a submodule")
	gitIn(t, repo, "checkout", "-q", "-f", "-")
	gitIn(t, repo, "update-ref", "refs/remotes/origin/feat/sub", "feat/sub")
	write(file("changed"), taskFileJSON("feat/changed", 4))
	write(file("bad"), []byte("{"))
	write(".aimi/tasks/untracked-tasks.json", taskFileJSON("feat/untracked", 2))
	write(".aimi/tasks/nested/deep-tasks.json", taskFileJSON("feat/deep", 2))
	write(".aimi/tasks/rerun-tasks.json", taskFileJSON("feat/rerun", 2)) // differs from its branch
	files = append(files, ".aimi/tasks/untracked-tasks.json", ".aimi/tasks/nested/deep-tasks.json",
		".aimi/tasks/missing-tasks.json", files[0], "../outside.json")
	return repo, files
}

// gitOut runs git in repo and returns its output.
func gitOut(t *testing.T, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// TestLoadAllAsRunAnswersAsEachFileAlone: reading many task files in one
// batch gives, file for file, what loadAsRun gives for each alone: the same
// copy, or the same message, on branches that exist and that do not, in
// local and remote mode, and in directories git cannot read.
func TestLoadAllAsRunAnswersAsEachFileAlone(t *testing.T) {
	repo, files := batchRepo(t)
	noCommit, noGit := t.TempDir(), t.TempDir()
	gitIn(t, noCommit, "init", "-q")
	for _, d := range []string{noCommit, noGit} {
		os.MkdirAll(filepath.Join(d, ".aimi", "tasks"), 0o755)
		os.WriteFile(filepath.Join(d, ".aimi", "tasks", "x-tasks.json"), taskFileJSON("feat/x", 1), 0o644)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		repo  string
		files []string
	}{{repo, files}, {noCommit, []string{".aimi/tasks/x-tasks.json"}}, {noGit, []string{".aimi/tasks/x-tasks.json"}}} {
		for _, local := range []bool{true, false} {
			got := loadAllAsRun(ctx, tc.repo, tc.files, local)
			kinds := map[string]bool{}
			for i, p := range tc.files {
				if checkTaskPath(p) != nil {
					continue
				}
				tf, err := loadAsRun(ctx, tc.repo, p, local)
				if want, have := describeLoad(tf, err), describeLoad(got[i].tf, got[i].err); want != have {
					t.Errorf("local=%v %s:\nbatch: %s\nalone: %s", local, p, have, want)
				}
				kinds[strings.SplitN(describeLoad(tf, err), ":", 2)[0]] = true
				t.Logf("%s: %s", p, cutText(describeLoad(tf, err), 160))
			}
			t.Logf("local=%v %s: %d files, answers: %v", local, filepath.Base(tc.repo), len(tc.files), kinds)
		}
	}
}

// describeLoad is a load's answer in words, to compare two.
func describeLoad(tf interface{ Marshal() ([]byte, error) }, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	data, _ := tf.Marshal()
	return fmt.Sprintf("loaded: %s", data)
}

// TestLoadAllAsRunTakesTwoGitProcesses: validating any number of task files
// starts two git processes, not some per file.
func TestLoadAllAsRunTakesTwoGitProcesses(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	shim, log := t.TempDir(), filepath.Join(t.TempDir(), "git.log")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", log, real)
	if err := os.WriteFile(filepath.Join(shim, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{8, 32} {
		repo, files := validateRepo(t, n)
		t.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))
		os.Remove(log)
		for _, local := range []bool{true, false} {
			if _, err := validateTasks(context.Background(), repo, files, nil, local); err != nil {
				t.Fatal(err)
			}
		}
		data, _ := os.ReadFile(log)
		if runs := strings.Count(string(data), "\n"); runs != 4 {
			t.Errorf("%d task files, local then remote: %d git processes, want 2 each:\n%s", n, runs, data)
		}
	}
}
