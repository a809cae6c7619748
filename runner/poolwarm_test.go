package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// WarmUp's request goes the whole way through the parser and validator (a
// rejected one would stop before the caches it is there to fill).
func TestWarmUpsRequestIsValid(t *testing.T) {
	line, err := warmRequest()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := acpmsg.ParseTaskRequest(line); err != nil {
		t.Fatalf("the warm-up's task-request is refused: %v", err)
	}
}

// WarmUp leaves the workspace and the claim's directory as they were, and
// does nothing outside a warm-pool sandbox.
func TestWarmUpLeavesNothingBehind(t *testing.T) {
	ws, tmp := t.TempDir(), t.TempDir()
	for _, d := range claimWrites {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, ".git", "index"), []byte("DIRC"), 0o644)
	list := func() []string {
		var all []string
		for _, root := range []string{ws, tmp} {
			filepath.WalkDir(root, func(p string, _ os.DirEntry, _ error) error { all = append(all, p); return nil })
		}
		return all
	}
	before := list()
	env := map[string]string{contract.EnvWarm: "1", contract.EnvWorkspace: ws, contract.EnvWorkspaceBase: "0123"}
	WarmUp(func(k string) string { return env[k] }, tmp)
	if after := list(); !slices.Equal(before, after) {
		t.Fatalf("WarmUp left %v, had %v", after, before)
	}
	// Outside a pool sandbox nothing is written: a file made and removed
	// would move the directories' times.
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []string{tmp, ws, filepath.Join(ws, ".git")} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	env[contract.EnvWarm] = ""
	WarmUp(func(k string) string { return env[k] }, tmp)
	for _, d := range []string{tmp, ws, filepath.Join(ws, ".git")} {
		if fi, err := os.Stat(d); err != nil || !fi.ModTime().Equal(old) {
			t.Fatalf("%s was written outside a pool sandbox (modified %v, %v)", d, fi.ModTime(), err)
		}
	}
}

// The workspace's tree is the repository's: a link in it (here .aimi, to
// a directory outside) never takes the warm-up's write out of it, though
// the runner is still root when it runs.
func TestWarmUpWritesNothingThroughALink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, ".aimi")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []string{outside, filepath.Join(outside, "tasks")} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{contract.EnvWarm: "1", contract.EnvWorkspace: ws, contract.EnvWorkspaceBase: "0123"}
	WarmUp(func(k string) string { return env[k] }, t.TempDir())
	for _, d := range []string{outside, filepath.Join(outside, "tasks")} {
		if fi, err := os.Stat(d); err != nil || !fi.ModTime().Equal(old) {
			t.Fatalf("%s was written through the workspace's link (modified %v, %v)", d, fi.ModTime(), err)
		}
	}
}
