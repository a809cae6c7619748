package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/gittest"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/spec"

	"github.com/aimi-tools/swarm/state"
)

// taskFileJSON renders a valid v3 task file with n linear stories.
func taskFileJSON(branch string, n int) []byte {
	type story struct {
		ID                 string   `json:"id"`
		Title              string   `json:"title"`
		Description        string   `json:"description"`
		AcceptanceCriteria []string `json:"acceptanceCriteria"`
		Priority           int      `json:"priority"`
		Status             string   `json:"status"`
		DependsOn          []string `json:"dependsOn"`
		Notes              string   `json:"notes"`
	}
	var ss []story
	for i := 1; i <= n; i++ {
		deps := []string{}
		if i > 1 {
			deps = append(deps, fmt.Sprintf("US-%03d", i-1))
		}
		ss = append(ss, story{ID: fmt.Sprintf("US-%03d", i), Title: fmt.Sprintf("Story %d", i),
			Description:        fmt.Sprintf("As a developer, I want step %d so that the feature grows.", i),
			AcceptanceCriteria: []string{fmt.Sprintf("File step-%d.txt exists", i), "Typecheck passes"},
			Priority:           i, Status: "pending", DependsOn: deps, Notes: ""})
	}
	f := map[string]any{
		"schemaVersion": "3.0",
		"metadata": map[string]any{"title": "feat: " + branch, "type": "feat", "branchName": branch,
			"createdAt": "2026-11-20", "planPath": nil, "maxConcurrency": 2},
		"userStories": ss,
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	return b
}

// testRepo makes a git repository with an origin and task files
// .aimi/tasks/<name>-tasks.json of stories stories each; it returns the
// repo path and the task file paths.
func testRepo(t testing.TB, names []string, stories int) (string, []string) {
	t.Helper()
	repo := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	run("remote", "add", "origin", gittest.NowhereOrigin)
	dir := filepath.Join(repo, ".aimi", "tasks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range names {
		p := ".aimi/tasks/" + n + "-tasks.json"
		if err := os.WriteFile(filepath.Join(repo, p), taskFileJSON("feat/"+n, stories), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	commitTasks(t, repo)
	return repo, paths
}

// commitTasks commits the task files of repo: the daemon runs the committed
// copy, as the container does.
func commitTasks(t testing.TB, repo string) {
	t.Helper()
	for _, args := range [][]string{{"add", "-A", ".aimi/tasks"}, {"-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-q", "--allow-empty", "-m", "task files"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// validateStateFile checks the repo's swarm-state.json against the shared
// schema.
func validateStateFile(t testing.TB, repo string) *state.Swarm {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".aimi", "swarm-state.json"))
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	if err := spec.ValidateState(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	sw, err := state.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// testLogger logs to the test log only when -v.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// waitTerminal polls Status until every container is terminal.
func waitTerminal(t testing.TB, m *Manager, repo string, within time.Duration) api.SwarmView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		v, err := m.Status(ctx, repo)
		if err == nil && allTerminal(v) && settled(m, repo) {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("swarm not terminal after %v: %+v (err %v)", within, describe(v), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func allTerminal(v api.SwarmView) bool {
	if v.State == nil {
		return false
	}
	for _, c := range v.State.Containers {
		if !c.Status.Terminal() {
			return false
		}
	}
	return true
}

func describe(v api.SwarmView) string {
	var b strings.Builder
	for _, c := range v.Containers {
		fmt.Fprintf(&b, "\n  %s %s errs=%v exit=%v last=%q", c.Name, c.Status, c.Errors, ptrStr(c.ExitCode), c.LastOutput)
	}
	return b.String()
}

func ptrStr(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// detail finds a container's detail by task-file name fragment.
func detail(t testing.TB, v api.SwarmView, frag string) api.ContainerDetail {
	t.Helper()
	for _, c := range v.Containers {
		if strings.Contains(c.TaskFile, frag) {
			return c
		}
	}
	t.Fatalf("no container for %q in %s", frag, describe(v))
	return api.ContainerDetail{}
}

// journal reads a container's journal.
func readJournal(t testing.TB, repo, swarmID, name string) []state.Record {
	t.Helper()
	recs, err := state.ReadJournal(state.Open(repo).JournalPath(contract.Sandbox{Swarm: swarmID, Container: name}))
	if err != nil {
		t.Fatalf("read journal of %s: %v", name, err)
	}
	return recs
}

// settled reports whether no supervisor of the repo's swarm runs: they
// flush the state file before they end, so the file is final.
func settled(m *Manager, repo string) bool {
	sw := m.getSwarm(repo)
	if sw == nil {
		return true
	}
	for _, c := range sw.list() {
		if sw.supervised(c) {
			return false
		}
	}
	return true
}
