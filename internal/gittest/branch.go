package gittest

import (
	"os"
	"path/filepath"
	"testing"
)

// CommitOn commits files (path -> content) on branch of the repository in
// dir (a work tree whose main branch exists), making the branch from main
// when it is new, and returns the new tip; main stays checked out.
func CommitOn(t testing.TB, dir, branch string, files map[string]string) string {
	t.Helper()
	if branch != "main" {
		if Git(t, dir, "branch", "--list", branch) == "" {
			Git(t, dir, "branch", branch, "main")
		}
		Git(t, dir, "checkout", "-q", branch)
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "on "+branch)
	tip := Git(t, dir, "rev-parse", "HEAD")
	Git(t, dir, "checkout", "-q", "main")
	return tip
}

// NowhereOrigin is an origin URL for a test whose checkout needs one but
// never a conversation with it: this machine's discard port, where
// nothing listens, so a git command that reaches for it fails at once and
// sends nothing off the machine (a placeholder such as example.com would
// be looked up and dialled on the internet).
const NowhereOrigin = "https://127.0.0.1:9/org/repo.git"
