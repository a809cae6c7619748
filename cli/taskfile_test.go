package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/taskfiletest"
)

// TestDiscoveryReadsNoFIFODeviceOrOutsideFile: --all discovery lists a FIFO,
// a link to /dev/zero and a link out of the repository with a problem each,
// at once, without reading them.
func TestDiscoveryReadsNoFIFODeviceOrOutsideFile(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, ".aimi", "tasks")
	os.MkdirAll(dir, 0o755)
	outside := filepath.Join(t.TempDir(), "other-tasks.json")
	os.WriteFile(outside, []byte(`{"schemaVersion":"3.0","metadata":{"branchName":"leak"},"userStories":[]}`), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out-tasks.json"))
	os.Symlink("/dev/zero", filepath.Join(dir, "z-tasks.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo-tasks.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		found []taskFile
		err   error
	}
	done := make(chan result, 1)
	go func() { f, err := discoverTaskFiles(repo); done <- result{f, err} }()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("discovery did not return within 10s (blocked on the FIFO?)")
	}
	if r.err != nil || len(r.found) != 3 {
		t.Fatalf("discover: %v %+v", r.err, r.found)
	}
	want := map[string]string{"out-tasks.json": "lead out", "z-tasks.json": "lead out", "fifo-tasks.json": "FIFO"}
	for _, f := range r.found {
		w := want[filepath.Base(f.Path)]
		if f.Branch != "" || !strings.Contains(f.Problem, w) {
			t.Errorf("%s: branch %q problem %q, want a problem with %q", f.Path, f.Branch, f.Problem, w)
		}
	}
}

// TestTasksValidateRefusesAFIFOAndADevice: tasks validate answers at once.
func TestTasksValidateRefusesAFIFOAndADevice(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		code, _, errs := runCLI(t, "", "tasks", "validate", fifo, "/dev/zero")
		if code != ExitUsage {
			errs = "exit code is not ExitUsage: " + errs
		}
		done <- errs
	}()
	select {
	case errs := <-done:
		if strings.Count(errs, "not a regular file") != 2 {
			t.Errorf("stderr: %s", errs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tasks validate did not return within 10s")
	}
}

// TestTasksValidateAnswerIsBounded: a task file under 1 MB whose graph has a
// cycle at every depth gives a bounded answer that still says what is wrong.
func TestTasksValidateAnswerIsBounded(t *testing.T) {
	data := taskfiletest.HostileGraph(1000, 60)
	path := writeFile(t, "hostile-tasks.json", string(data))
	code, out, errs := runCLI(t, "", "tasks", "validate", path)
	if code != ExitInvalid || len(out) > 64<<10 {
		t.Fatalf("exit %d, %d bytes of output for a %d-byte file; stderr %s", code, len(out), len(data), errs)
	}
	for _, want := range []string{"more than once (60 times)", "more problems are not listed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%.2000s", want, out)
		}
	}
}

// TestTasksValidateRefusesTwoFilesOnOneBranch names the branch and both
// files.
func TestTasksValidateRefusesTwoFilesOnOneBranch(t *testing.T) {
	body := `{"schemaVersion":"3.0","metadata":{"title":"t","type":"bug","branchName":"feat/same","createdAt":"2026-01-02"},
"userStories":[{"id":"US-001","title":"x","description":"y","acceptanceCriteria":["Typecheck passes"],"priority":1,"status":"pending","dependsOn":[]}]}`
	a, b := writeFile(t, "a-tasks.json", body), writeFile(t, "b-tasks.json", body)
	code, out, errs := runCLI(t, "", "tasks", "validate", a, b)
	if code != ExitInvalid {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	want := fmt.Sprintf("Error: Invalid tasks.json - %s and %s both name the branch \"feat/same\"", a, b)
	if !strings.Contains(out, a+": valid") || !strings.Contains(out, b+": invalid (1 problem)") || !strings.Contains(out, want) {
		t.Errorf("output:\n%s\nwant %q", out, want)
	}
}

// TestTaskFileTextIsNeutralisedInTheListing: the task-file listing of
// `swarm start` shows a branch name with escape sequences escaped.
func TestTaskFileTextIsNeutralisedInTheListing(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, ".aimi", "tasks")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "evil-tasks.json"), []byte(`{"metadata":{"branchName":"\u001b]0;pwned\u0007\u001b[2J\u202e"},"userStories":[]}`), 0o644)
	_, out, errs := runCLI(t, "", "swarm", "start", "--repo", repo, "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if !strings.Contains(out, `\u001b]0;pwned\u0007\u001b[2J\u202e`) || strings.ContainsAny(out+errs, "\x1b\x07\u202e") {
		t.Fatalf("listing:\n%q\n%q", out, errs)
	}
}
