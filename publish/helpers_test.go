package publish

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/gitcmd"
)

var testEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
}

// testGit is the Git the tests hand to the package: hermetic, with an
// identity for the commits it may make.
var testGit = gitcmd.Git{Env: testEnv}

func mustGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newRepo(t testing.TB, bare bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if bare {
		mustGit(t, "", "init", "-q", "--bare", "-b", "main", dir)
		return dir
	}
	mustGit(t, "", "init", "-q", "-b", "main", dir)
	commit(t, dir, "README.md")
	return dir
}

func commit(t testing.TB, dir, name string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, dir, "add", name)
	mustGit(t, dir, "commit", "-q", "-m", "add "+name)
	return mustGit(t, dir, "rev-parse", "HEAD")
}
