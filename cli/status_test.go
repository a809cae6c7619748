package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/spec"

	"github.com/aimi-tools/swarm/state"
)

const statusSwarmID = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"

// runStatus runs the file-only `status` command (not the daemon wrapper)
// and returns its exit code and output.
func runStatus(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newSwarmStatusCmd(Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.Code, out.String(), err.Error()
	default:
		return ExitUsage, out.String(), err.Error()
	}
}

func sampleSwarm() *state.Swarm {
	t0 := time.Date(2026, 11, 22, 10, 31, 0, 0, time.UTC)
	pr := "https://github.com/org/repo/pull/42"
	mk := func(i int, name string, st state.ContainerStatus, p state.Progress) *state.Container {
		return &state.Container{ContainerID: "abc000abc00" + string(rune('0'+i)), ContainerName: "aimi-swarm-" + name,
			TaskFilePath: ".aimi/tasks/2026-03-01-" + name + "-tasks.json", BranchName: "feat/" + name,
			Status: st, StoryProgress: p, CreatedAt: t0, UpdatedAt: t0}
	}
	sw := &state.Swarm{SwarmID: statusSwarmID, CreatedAt: t0, UpdatedAt: t0, Containers: []*state.Container{
		mk(1, "auth", state.StatusCompleted, state.Progress{Total: 5, Completed: 5}),
		mk(2, "db", state.StatusRunning, state.Progress{Total: 4, Completed: 1, InProgress: 1, Pending: 1}),
		mk(3, "ui", state.StatusFailed, state.Progress{Total: 3, Completed: 1, Failed: 1, Pending: 1}),
	}}
	sw.Containers[0].PRURL = &pr
	return sw
}

func saveSample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := state.Open(root).Save(context.Background(), sampleSwarm()); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestRenderStatus(t *testing.T) {
	var b bytes.Buffer
	RenderStatus(&b, sampleSwarm())
	got := b.String()
	want := []string{
		"Swarm " + statusSwarmID + "  updated 2026-11-22T10:31:00Z\n",
		"#  CONTAINER        TASK FILE                               BRANCH     STATUS     PROGRESS  STORIES                       PR\n",
		"1  aimi-swarm-auth  .aimi/tasks/2026-03-01-auth-tasks.json  feat/auth  completed  5/5       -                             https://github.com/org/repo/pull/42\n",
		"2  aimi-swarm-db    .aimi/tasks/2026-03-01-db-tasks.json    feat/db    running    1/4       1 running, 1 pending, 1 skipped  -\n",
		"Summary: 1 completed, 1 running, 1 failed (3 total)\n",
	}
	for _, w := range want {
		if !strings.Contains(strings.ReplaceAll(got, " ", ""), strings.ReplaceAll(w, " ", "")) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	if !strings.HasPrefix(got, want[0]) || !strings.HasSuffix(got, want[4]) {
		t.Errorf("header or summary misplaced:\n%s", got)
	}
	b.Reset()
	RenderStatus(&b, &state.Swarm{SwarmID: statusSwarmID})
	if !strings.Contains(b.String(), "Summary: no containers (0 total)") {
		t.Errorf("empty swarm:\n%s", b.String())
	}
}

func TestSwarmStatusCommand(t *testing.T) {
	t.Run("no state file says so and how to start, exit 1", func(t *testing.T) {
		code, out, msg := runStatus(t, "--repo", t.TempDir())
		if code != ExitInvalid || out != "" || !strings.Contains(msg, "no swarm state") || !strings.Contains(msg, "aimi swarm start") {
			t.Fatalf("code %d out %q msg %q", code, out, msg)
		}
	})
	t.Run("table from a subdirectory of the repository", func(t *testing.T) {
		root := saveSample(t)
		sub := filepath.Join(root, "src", "pkg")
		os.MkdirAll(sub, 0o755)
		code, out, msg := runStatus(t, "--repo", sub)
		if code != ExitOK || !strings.Contains(out, "aimi-swarm-auth") || !strings.Contains(out, "Summary: 1 completed, 1 running, 1 failed (3 total)") {
			t.Fatalf("code %d msg %q out:\n%s", code, msg, out)
		}
	})
	t.Run("json prints the file as it is and it validates", func(t *testing.T) {
		root := saveSample(t)
		code, out, msg := runStatus(t, "--repo", root, "--json")
		if code != ExitOK {
			t.Fatalf("code %d: %s", code, msg)
		}
		disk, _ := os.ReadFile(state.Open(root).Path())
		if out != string(disk) {
			t.Fatalf("printed something else than the file:\n%s", out)
		}
		if err := spec.ValidateState([]byte(out)); err != nil {
			t.Fatalf("--json output does not validate: %v", err)
		}
	})
	t.Run("json refuses a file with a field the schema lacks, exit 1", func(t *testing.T) {
		root := saveSample(t)
		p := state.Open(root).Path()
		b, _ := os.ReadFile(p)
		os.WriteFile(p, bytes.Replace(b, []byte(`"containers"`), []byte(`"extra": true, "containers"`), 1), 0o644)
		code, out, msg := runStatus(t, "--repo", root, "--json")
		if code != ExitInvalid || out != "" || !strings.Contains(msg, "extra") {
			t.Fatalf("code %d out %q msg %q", code, out, msg)
		}
	})
	t.Run("corrupt file is named and left as it is, exit 1", func(t *testing.T) {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, ".aimi"), 0o755)
		os.WriteFile(state.Open(root).Path(), []byte("{\"swarmId\": "), 0o644)
		code, _, msg := runStatus(t, "--repo", root)
		if code != ExitInvalid || !strings.Contains(msg, "left as it is") || strings.Contains(msg, ".corrupt-") {
			t.Fatalf("code %d msg %q", code, msg)
		}
		if b, _ := os.ReadFile(state.Open(root).Path()); string(b) != "{\"swarmId\": " {
			t.Fatalf("file changed: %q", b)
		}
	})
}

// shellToolFile is a state file as the aimi shell tool leaves it: jq with
// --arg writes numbers as strings.
const shellToolFile = `{"swarmId":"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b","createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z",
"containers":[{"containerId":"abc000abc000","containerName":"aimi-a","taskFilePath":".aimi/tasks/a-tasks.json","branchName":"feat/a",
"status":"running","prUrl":null,"storyProgress":{"total":4,"completed":1,"failed":0,"inProgress":1,"pending":2},
"createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z","acpPid":"12"}]}
`

// TestStatusWithoutDaemonNeverMovesTheFile runs `aimi swarm status` as a
// user does, with no daemon on the socket, over files the shell tool wrote
// or broke: the read shows what it can and never moves, renames or rewrites
// the file.
func TestStatusWithoutDaemonNeverMovesTheFile(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		json          bool
		code          int
		want          string
	}{
		{"acpPid as a string is read", shellToolFile, false, ExitOK, "aimi-a"},
		{"acpPid that is no number is named", strings.Replace(shellToolFile, `"12"`, `"x12"`, 1), false, ExitInvalid, "containers[0].acpPid"},
		{"json names the field the schema refuses", shellToolFile, true, ExitInvalid, "containers[0].acpPid"},
		{"garbage is reported", "{\"swarmId\": ", false, ExitInvalid, "cannot read swarm state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, ".aimi")
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "swarm-state.json"), []byte(tc.content), 0o644)
			var out, errOut bytes.Buffer
			args := []string{"swarm", "status", "--repo", root, "--socket", filepath.Join(root, "no-daemon.sock")}
			if tc.json {
				args = append(args, "--json")
			}
			code := Run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d (want %d), want %q in:\n%s\n%s", code, tc.code, tc.want, out.String(), errOut.String())
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 || ents[0].Name() != "swarm-state.json" {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("a read-only command changed .aimi: %v", names)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "swarm-state.json")); string(b) != tc.content {
				t.Fatalf("a read-only command rewrote the file:\n%s", b)
			}
		})
	}
}
