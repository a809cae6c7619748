package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/internal/gittest"
)

// skipIndex is a version 4 index made by git of a tree with three files,
// two of them marked skip-worktree.
func skipIndex(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	gittest.Git(t, "", "init", "-q", dir)
	must(t, os.MkdirAll(filepath.Join(dir, ".aimi", "tasks"), 0o755))
	for _, p := range []string{tasksPath("a"), tasksPath("b"), "src.txt"} {
		must(t, os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644))
	}
	gittest.Git(t, dir, "-c", "index.version=4", "add", "-A")
	gittest.Git(t, dir, "update-index", "--index-version", "4")
	gittest.Git(t, dir, "update-index", "--skip-worktree", "--", tasksPath("a"), tasksPath("b"))
	data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	must(t, err)
	return data
}

// FuzzClearSkipWorktree: whatever the index, nothing panics, and an index
// the mark was cleared in ends in its right checksum.
func FuzzClearSkipWorktree(f *testing.F) {
	f.Add(skipIndex(f), tasksPath("a"))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"), "x")
	f.Fuzz(func(t *testing.T, index []byte, path string) {
		found, err := clearSkipWorktree(index, path)
		if err == nil && found {
			if h, _ := indexHash(index); h == nil {
				t.Fatal("the cleared index's checksum is wrong")
			}
		}
	})
}

// TestClearSkipWorktreeOnGitsIndex: git reads the changed index, with the
// mark gone from that one entry only.
func TestClearSkipWorktreeOnGitsIndex(t *testing.T) {
	index := skipIndex(t)
	found, err := clearSkipWorktree(index, tasksPath("b"))
	if err != nil || !found {
		t.Fatalf("found %v, err %v", found, err)
	}
	dir := t.TempDir()
	gittest.Git(t, "", "init", "-q", dir)
	must(t, os.WriteFile(filepath.Join(dir, ".git", "index"), index, 0o644))
	want := "S " + tasksPath("a") + "\nH " + tasksPath("b") + "\nH src.txt"
	if got := gittest.Git(t, dir, "ls-files", "-v"); got != want {
		t.Errorf("ls-files -v:\n%s\nwant\n%s", got, want)
	}
	if found, err := clearSkipWorktree(index, tasksPath("b")); found || err != nil {
		t.Errorf("cleared twice: %v %v", found, err)
	}
}
