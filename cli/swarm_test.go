package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/state"
)

// syncBuffer is a syncbuf.Buffer that may claim to be a terminal.
type syncBuffer struct {
	syncbuf.Buffer
	tty bool
}

func (b *syncBuffer) IsTerminal() bool { return b.tty }

// ttyIn is stdin that claims to be a terminal.
type ttyIn struct{ io.Reader }

func (ttyIn) IsTerminal() bool { return true }

type result struct {
	code     int
	out, err string
}

// runAimi runs the CLI in-process.
func runAimi(ctx context.Context, in io.Reader, out *syncBuffer, args ...string) result {
	if in == nil {
		in = strings.NewReader("")
	}
	if out == nil {
		out = &syncBuffer{}
	}
	var errBuf syncBuffer
	code := Run(ctx, args, Streams{In: in, Out: out, Err: &errBuf})
	return result{code, out.String(), errBuf.String()}
}

// taskRepo makes a repository with task files; later names are newer.
func taskRepo(t *testing.T, names ...string) string {
	t.Helper()
	repo := daemontest.ShortTempDir(t)
	repo, _ = filepath.EvalSymlinks(repo)
	dir := filepath.Join(repo, ".aimi", "tasks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i, n := range names {
		branch := "feat/" + strings.TrimSuffix(n, "-tasks.json")
		body := fmt.Sprintf(`{"schemaVersion":"3.0","metadata":{"title":"t","type":"feature","branchName":%q,"createdAt":"2026-11-22T00:00:00Z","planPath":null},"userStories":[%s]}`,
			branch, strings.Repeat(`{"id":"US-001"},`, i+1)[:len(`{"id":"US-001"},`)*(i+1)-1])
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		os.Chtimes(p, mt, mt)
	}
	return repo
}

func swarmView(repo string, cs ...*state.Container) api.SwarmView {
	v := daemontest.View(repo)
	v.State.Containers = cs
	return v
}

func ctr(name string, st state.ContainerStatus, done, total int) *state.Container {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return &state.Container{
		ContainerID: strings.Repeat("a", 12), ContainerName: name, TaskFilePath: ".aimi/tasks/" + strings.TrimPrefix(name, "aimi-") + "-tasks.json",
		BranchName: "feat/" + name, Status: st, CreatedAt: now, UpdatedAt: now,
		StoryProgress: state.Progress{Total: total, Completed: done, Pending: total - done},
	}
}

func TestSwarmStartSendsTheSelectedTaskFiles(t *testing.T) {
	repo := taskRepo(t, "alpha-tasks.json", "beta-tasks.json", "gamma-tasks.json")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"--all takes every task file, newest first", []string{"--all"}, []string{".aimi/tasks/gamma-tasks.json", ".aimi/tasks/beta-tasks.json", ".aimi/tasks/alpha-tasks.json"}},
		{"--file with a bare name finds it in .aimi/tasks", []string{"--file", "beta-tasks.json"}, []string{".aimi/tasks/beta-tasks.json"}},
		{"--file with an absolute path is made repo-relative", []string{"--file", filepath.Join(repo, ".aimi/tasks/alpha-tasks.json")}, []string{".aimi/tasks/alpha-tasks.json"}},
		{"--files takes a comma list", []string{"--files", "alpha-tasks.json,gamma-tasks.json"}, []string{".aimi/tasks/alpha-tasks.json", ".aimi/tasks/gamma-tasks.json"}},
		{"--file repeated adds up", []string{"--file", "alpha-tasks.json", "--file", "beta-tasks.json"}, []string{".aimi/tasks/alpha-tasks.json", ".aimi/tasks/beta-tasks.json"}},
		{"a file the repo does not have goes to the daemon to judge", []string{"--file", "../../etc/passwd"}, []string{"../../etc/passwd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got api.StartRequest
			fake := &daemontest.Swarms{StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
				got = r
				return swarmView(r.RepoPath, ctr("aimi-alpha", state.StatusPending, 0, 1)), nil
			}}
			sock, _ := daemontest.Serve(t, fake)
			args := append([]string{"swarm", "start", "--repo", repo, "--socket", sock, "--max", "2", "--image", "img:x", "--local"}, tt.args...)
			r := runAimi(context.Background(), nil, nil, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if strings.Join(got.TaskFiles, " ") != strings.Join(tt.want, " ") {
				t.Errorf("task files = %q, want %q", got.TaskFiles, tt.want)
			}
			if got.RepoPath != repo || got.Max != 2 || got.Image != "img:x" || !got.Local || got.Append || got.Force {
				t.Errorf("request = %+v", got)
			}
			if !strings.Contains(r.out, daemontest.SwarmID) || !strings.Contains(r.out, "aimi-alpha") {
				t.Errorf("output lacks the swarm id or containers:\n%s", r.out)
			}
		})
	}
}

func TestSwarmStartFindsTheRepoFromASubdirectory(t *testing.T) {
	repo := taskRepo(t, "alpha-tasks.json")
	sub := filepath.Join(repo, "src", "pkg")
	os.MkdirAll(sub, 0o755)
	var got api.StartRequest
	fake := &daemontest.Swarms{StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
		got = r
		return daemontest.View(r.RepoPath), nil
	}}
	sock, _ := daemontest.Serve(t, fake)
	if r := runAimi(context.Background(), nil, nil, "swarm", "start", "--all", "--repo", sub, "--socket", sock); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if got.RepoPath != repo {
		t.Errorf("repo = %s, want %s", got.RepoPath, repo)
	}
}

func TestSwarmStartWithoutSelectionListsAndAsksOnlyOnATerminal(t *testing.T) {
	repo := taskRepo(t, "alpha-tasks.json", "beta-tasks.json")
	var got api.StartRequest
	fake := &daemontest.Swarms{StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
		got = r
		return daemontest.View(r.RepoPath), nil
	}}
	sock, _ := daemontest.Serve(t, fake)

	t.Run("not a terminal: list, then exit 2 asking for a flag", func(t *testing.T) {
		r := runAimi(context.Background(), strings.NewReader("1\n"), nil, "swarm", "start", "--repo", repo, "--socket", sock)
		if r.code != ExitUsage || !strings.Contains(r.err, "pass --all, --file F or --files A,B") {
			t.Fatalf("exit %d, stderr %q", r.code, r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], "BRANCH") || !strings.Contains(lines[0], "STORIES") {
			t.Fatalf("listing:\n%s", r.out)
		}
		// newest first, with branch and story count
		if !strings.Contains(lines[1], "beta-tasks.json") || !strings.Contains(lines[1], "feat/beta") || !strings.Contains(lines[1], " 2 ") {
			t.Errorf("first row %q", lines[1])
		}
		if !strings.Contains(lines[2], "alpha-tasks.json") || !strings.Contains(lines[2], " 1 ") {
			t.Errorf("second row %q", lines[2])
		}
		for _, c := range fake.Calls() {
			if c == "start" {
				t.Fatal("started without a selection")
			}
		}
	})
	t.Run("terminal: a bad answer asks again, a good one starts", func(t *testing.T) {
		r := runAimi(context.Background(), ttyIn{strings.NewReader("7\n2\n")}, nil, "swarm", "start", "--repo", repo, "--socket", sock)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if !strings.Contains(r.out, "7 is not in the list") {
			t.Errorf("bad answer not explained:\n%s", r.out)
		}
		if strings.Join(got.TaskFiles, ",") != ".aimi/tasks/alpha-tasks.json" {
			t.Errorf("started %q", got.TaskFiles)
		}
	})
	t.Run("terminal: empty answer cancels with exit 2", func(t *testing.T) {
		r := runAimi(context.Background(), ttyIn{strings.NewReader("\n")}, nil, "swarm", "start", "--repo", repo, "--socket", sock)
		if r.code != ExitUsage || !strings.Contains(r.err, "nothing selected") {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
	})
}

func TestParseSelection(t *testing.T) {
	tests := []struct {
		in   string
		want string
		bad  bool
	}{
		{"1,3", "[0 2]", false},
		{"2 1", "[1 0]", false},
		{"1-3", "[0 1 2]", false},
		{"all", "[0 1 2 3]", false},
		{"1,1", "[0]", false},
		{"0", "", true},
		{"5", "", true},
		{"x", "", true},
		{"3-1", "", true},
	}
	for _, tt := range tests {
		got, err := parseSelection(tt.in, 4)
		if (err != nil) != tt.bad || (!tt.bad && fmt.Sprint(got) != tt.want) {
			t.Errorf("parseSelection(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestSwarmCommandErrorsAndExitCodes(t *testing.T) {
	repo := taskRepo(t, "alpha-tasks.json")
	empty := daemontest.ShortTempDir(t)
	down := filepath.Join(daemontest.ShortTempDir(t), "none.sock")
	fake := &daemontest.Swarms{
		StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
			if r.Append || r.Force {
				return daemontest.View(r.RepoPath), nil
			}
			if strings.Contains(strings.Join(r.TaskFiles, ","), "bad") {
				return api.SwarmView{}, &api.TaskFileError{Problems: []api.TaskFileProblem{{Path: r.TaskFiles[0], Reason: "US-001: dependsOn US-404, which does not exist"}}}
			}
			return api.SwarmView{}, api.ErrActiveSwarm
		},
		StatusFunc: func(string) (api.SwarmView, error) {
			return api.SwarmView{}, api.ErrNoSwarm
		},
		StopFunc: func(_ string, names []string) (api.SwarmView, error) {
			return api.SwarmView{}, fmt.Errorf("%s: %w", names[0], api.ErrUnknownContainer)
		},
		JournalFunc: func(context.Context, api.LogsRequest) (<-chan state.Record, error) {
			return nil, fmt.Errorf("aimi-nope: %w", api.ErrUnknownContainer)
		},
	}
	sock, _ := daemontest.Serve(t, fake)
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"daemon down: exit 3 with the start command", []string{"swarm", "start", "--all", "--repo", repo, "--socket", down}, ExitDaemon, "start it with 'aimid &' or 'sudo systemctl start aimid'"},
		{"daemon down for stop", []string{"swarm", "stop", "--repo", repo, "--socket", down}, ExitDaemon, "aimid &"},
		{"daemon down for logs", []string{"swarm", "logs", "aimi-a", "--repo", repo, "--socket", down}, ExitDaemon, "aimid &"},
		{"daemon down for status --watch", []string{"swarm", "status", "--watch", "--repo", repo, "--socket", down}, ExitDaemon, "aimid &"},
		{"--all with --file", []string{"swarm", "start", "--all", "--file", "x", "--repo", repo, "--socket", sock}, ExitUsage, "--all and --file/--files exclude each other"},
		{"--append with --force", []string{"swarm", "start", "--all", "--append", "--force", "--repo", repo, "--socket", sock}, ExitUsage, "--append and --force exclude each other"},
		{"negative --max", []string{"swarm", "start", "--all", "--max", "-1", "--repo", repo, "--socket", sock}, ExitUsage, "--max -1"},
		{"unknown flag", []string{"swarm", "start", "--bogus", "--socket", sock}, ExitUsage, "unknown flag: --bogus"},
		{"--max not a number", []string{"swarm", "start", "--max", "many", "--socket", sock}, ExitUsage, "invalid argument"},
		{"--all without task files", []string{"swarm", "start", "--all", "--repo", empty, "--socket", sock}, ExitUsage, "no task files in"},
		{"repo that does not exist", []string{"swarm", "start", "--all", "--repo", "/nonexistent/x", "--socket", sock}, ExitUsage, "pass --repo with an existing directory"},
		{"invalid task file: exit 1 with each problem", []string{"swarm", "start", "--file", "bad-tasks.json", "--repo", repo, "--socket", sock}, ExitInvalid, "bad-tasks.json: US-001: dependsOn US-404"},
		{"active swarm: exit 1 suggesting --append or --force", []string{"swarm", "start", "--all", "--repo", repo, "--socket", sock}, ExitInvalid, "use --append to add to it or --force to replace it"},
		{"status with no swarm: exit 1", []string{"swarm", "status", "--repo", repo, "--socket", sock}, ExitInvalid, "aimi swarm start"},
		{"stop of an unknown container: exit 1", []string{"swarm", "stop", "aimi-nope", "--repo", repo, "--socket", sock}, ExitInvalid, "no such container"},
		{"logs of an unknown container: exit 1", []string{"swarm", "logs", "aimi-nope", "--repo", repo, "--socket", sock}, ExitInvalid, "no such container"},
		{"logs without a name", []string{"swarm", "logs", "--socket", sock}, ExitUsage, "accepts 1 arg"},
		{"resume with an argument", []string{"swarm", "resume", "x", "--socket", sock}, ExitUsage, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAimi(context.Background(), nil, nil, tt.args...)
			if r.code != tt.code || !strings.Contains(r.err, tt.wantErr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", r.code, tt.code, r.err, tt.wantErr)
			}
		})
	}
}

// progressing is a fake whose status advances one step per call.
func progressing(repo string, steps ...[]*state.Container) *daemontest.Swarms {
	var n atomic.Int32
	return &daemontest.Swarms{
		StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
			return swarmView(r.RepoPath, steps[0]...), nil
		},
		StatusFunc: func(string) (api.SwarmView, error) {
			i := int(n.Add(1)) - 1
			if i >= len(steps) {
				i = len(steps) - 1
			}
			v := swarmView(repo, steps[i]...)
			for _, c := range steps[i] {
				d := api.ContainerDetail{Name: c.ContainerName, Status: string(c.Status), LastOutput: "working on " + c.ContainerName, Finished: c.Status.Terminal()}
				if c.Status == state.StatusFailed {
					d.Errors = []api.ErrorDetail{{Code: "CONTAINER_OOM", Message: "killed by the kernel: out of memory"}}
				}
				v.Containers = append(v.Containers, d)
			}
			return v, nil
		},
	}
}

func TestSwarmStartFollowShowsProgressUntilAllAreDone(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json", "b-tasks.json")
	steps := [][]*state.Container{
		{ctr("aimi-a", state.StatusPending, 0, 2), ctr("aimi-b", state.StatusPending, 0, 1)},
		{ctr("aimi-a", state.StatusRunning, 1, 2), ctr("aimi-b", state.StatusRunning, 0, 1)},
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusRunning, 0, 1)},
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusCompleted, 1, 1)},
	}
	failSteps := [][]*state.Container{
		steps[0],
		{ctr("aimi-a", state.StatusCompleted, 2, 2), ctr("aimi-b", state.StatusFailed, 0, 1)},
	}
	tests := []struct {
		name     string
		steps    [][]*state.Container
		tty      bool
		code     int
		wantOut  []string
		wantNone string
	}{
		{"plain lines, one per change, exit 0 when all completed", steps, false, 0,
			[]string{"aimi-a running 1/2 done: working on aimi-a", "aimi-a completed 2/2 done", "aimi-b completed 1/1 done"}, "\x1b["},
		{"a failed container makes exit 1 and shows its error", failSteps, false, ExitInvalid,
			[]string{"aimi-b failed 0/1 done: CONTAINER_OOM killed by the kernel", "aimi-b: CONTAINER_OOM: killed by the kernel: out of memory"}, "\x1b["},
		{"on a terminal the table is redrawn in place", steps, true, 0,
			[]string{"CONTAINER", "\x1b[3A\x1b[J", "completed"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := daemontest.Serve(t, progressing(repo, tt.steps...))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out := &syncBuffer{tty: tt.tty}
			r := runAimi(ctx, nil, out, "swarm", "start", "--all", "--follow", "--refresh", "10ms", "--repo", repo, "--socket", sock)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q\n%s", r.code, tt.code, r.err, r.out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(r.out, w) {
					t.Errorf("output lacks %q:\n%s", w, r.out)
				}
			}
			if tt.wantNone != "" && strings.Contains(r.out, tt.wantNone) {
				t.Errorf("output has %q:\n%q", tt.wantNone, r.out)
			}
			if !tt.tty && strings.Count(r.out, "aimi-a completed 2/2 done") != 1 {
				t.Errorf("an unchanged row was printed again:\n%s", r.out)
			}
		})
	}
}

func TestSwarmStatusFromTheDaemon(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	fake := progressing(repo, []*state.Container{ctr("aimi-a", state.StatusFailed, 1, 3)})
	sock, _ := daemontest.Serve(t, fake)
	r := runAimi(context.Background(), nil, nil, "swarm", "status", "--repo", repo, "--socket", sock)
	if r.code != 0 || !strings.Contains(r.out, "aimi-a") || !strings.Contains(r.out, "aimi-a: CONTAINER_OOM: killed by the kernel") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	r = runAimi(context.Background(), nil, nil, "swarm", "status", "--json", "--repo", repo, "--socket", sock)
	var got map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.out), &got) != nil || got["swarmId"] != daemontest.SwarmID {
		t.Fatalf("--json: exit %d %q", r.code, r.out)
	}
	if _, extra := got["containers"].([]any)[0].(map[string]any)["errors"]; extra {
		t.Error("--json printed fields the state file does not have")
	}
}

func TestSwarmStatusWatchRedrawsUntilInterrupted(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	fake := progressing(repo,
		[]*state.Container{ctr("aimi-a", state.StatusRunning, 0, 2)},
		[]*state.Container{ctr("aimi-a", state.StatusRunning, 1, 2)},
		[]*state.Container{ctr("aimi-a", state.StatusCompleted, 2, 2)})
	sock, _ := daemontest.Serve(t, fake)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan result)
	go func() {
		done <- runAimi(ctx, nil, out, "swarm", "status", "--watch", "--interval", "10ms", "--repo", repo, "--socket", sock)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "completed") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "running") || !strings.Contains(r.out, "completed") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.out, r.err)
	}
}

func TestSwarmStatusFallsBackToTheStateFileWithoutADaemon(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	v := swarmView(repo, ctr("aimi-a", state.StatusRunning, 1, 2))
	if err := state.Open(repo).Save(context.Background(), v.State); err != nil {
		t.Fatal(err)
	}
	down := filepath.Join(daemontest.ShortTempDir(t), "none.sock")
	for _, extra := range [][]string{nil, {"--json"}} {
		r := runAimi(context.Background(), nil, nil, append([]string{"swarm", "status", "--repo", repo, "--socket", down}, extra...)...)
		if r.code != 0 || !strings.Contains(r.err, "daemon not running; showing the state file") || !strings.Contains(r.out, "aimi-a") {
			t.Fatalf("%v: exit %d\nstdout %q\nstderr %q", extra, r.code, r.out, r.err)
		}
	}
}

func TestSwarmStopResumeCleanupPassTheirArguments(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	var stopped []string
	var retry, force bool
	fake := &daemontest.Swarms{
		StopFunc: func(_ string, n []string) (api.SwarmView, error) {
			stopped = n
			return swarmView(repo, ctr("aimi-a", state.StatusStopped, 0, 1)), nil
		},
		ResumeFunc: func(_ string, r bool) (api.SwarmView, error) {
			retry = r
			return swarmView(repo, ctr("aimi-a", state.StatusRunning, 0, 1)), nil
		},
		CleanupFunc: func(_ string, f bool) (api.CleanupReport, error) {
			force = f
			return api.CleanupReport{RepoPath: repo, Removed: []string{"aimi-a"},
				Kept:         []api.Kept{{Name: "aimi-b", Reason: "branch feat/b has 1 commit nobody received", Commits: []string{"abc123"}}},
				StateRemoved: false, Notes: []string{"git service forget s1: branch(es) feat/c; the mirror /d/s1.git is kept"}}, nil
		},
	}
	sock, _ := daemontest.Serve(t, fake)
	ctx := context.Background()
	r := runAimi(ctx, nil, nil, "swarm", "stop", "aimi-a", "aimi-b", "--repo", repo, "--socket", sock)
	if r.code != 0 || strings.Join(stopped, ",") != "aimi-a,aimi-b" || !strings.Contains(r.out, "stopped") {
		t.Errorf("stop: exit %d %v\n%s", r.code, stopped, r.out)
	}
	r = runAimi(ctx, nil, nil, "swarm", "stop", "--repo", repo, "--socket", sock)
	if r.code != 0 || len(stopped) != 0 {
		t.Errorf("stop all: exit %d names %v", r.code, stopped)
	}
	r = runAimi(ctx, nil, nil, "swarm", "resume", "--retry-failed", "--repo", repo, "--socket", sock)
	if r.code != 0 || !retry || !strings.Contains(r.out, "running") {
		t.Errorf("resume: exit %d retry=%v\n%s", r.code, retry, r.out)
	}
	r = runAimi(ctx, nil, nil, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock)
	want := "removed: aimi-a\nkept aimi-b: branch feat/b has 1 commit nobody received\n  unreceived commit abc123\n"
	if r.code != 0 || !force || !strings.HasPrefix(r.out, want) || !strings.Contains(r.out, "\nnote: git service forget s1: branch(es) feat/c; the mirror /d/s1.git is kept\n") {
		t.Errorf("cleanup: exit %d force=%v\n%s", r.code, force, r.out)
	}
}

func TestSwarmLogsPrintsTheJournalReadably(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	at := time.Date(2026, 11, 22, 10, 31, 5, 0, time.UTC)
	recs := []state.Record{
		{Seq: 1, Time: at, Stream: "stdout", Valid: true, Type: "progress-update", Message: json.RawMessage(`{"type":"progress-update","payload":{"storyId":"US-001","status":"in_progress","output":"Starting"}}`)},
		{Seq: 2, Time: at, Stream: "stdout", Valid: false, Reason: "line is not JSON", Raw: "npm WARN deprecated"},
		{Seq: 3, Time: at, Stream: "stdout", Valid: true, Type: "progress-update", Rejected: "US-009 is not in the task file", Message: json.RawMessage(`{"type":"progress-update","payload":{"storyId":"US-009","status":"completed","output":"x"}}`)},
		{Seq: 4, Time: at, Stream: "stdout", Valid: true, Type: "completion", Message: json.RawMessage(`{"type":"completion","payload":{"status":"completed","prUrl":"https://github.com/o/r/pull/1","errors":[]}}`)},
		{Seq: 5, Time: at, Stream: "daemon", Valid: true, Type: "error", Message: json.RawMessage(`{"type":"error","payload":{"code":"CONTAINER_OOM","message":"out of memory"}}`)},
	}
	var gotFollow bool
	var gotReq api.LogsRequest
	fake := &daemontest.Swarms{JournalFunc: func(_ context.Context, req api.LogsRequest) (<-chan state.Record, error) {
		gotFollow, gotReq = req.Follow, req
		ch := make(chan state.Record, len(recs))
		for _, r := range recs {
			ch <- r
		}
		close(ch)
		return ch, nil
	}}
	sock, _ := daemontest.Serve(t, fake)
	r := runAimi(context.Background(), nil, nil, "swarm", "logs", "aimi-a", "--follow", "--repo", repo, "--socket", sock)
	if r.code != 0 || !gotFollow {
		t.Fatalf("exit %d follow=%v: %s", r.code, gotFollow, r.err)
	}
	want := []string{
		"2026-11-22 10:31:05  progress-update  US-001    in_progress  Starting",
		"2026-11-22 10:31:05  invalid          -         -            line is not JSON: npm WARN deprecated",
		"2026-11-22 10:31:05  progress-update  US-009    completed    x  [not applied: US-009 is not in the task file]",
		"2026-11-22 10:31:05  completion       -         completed    pr https://github.com/o/r/pull/1",
		"2026-11-22 10:31:05  daemon:error     -         CONTAINER_OOM  out of memory",
	}
	got := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs:\n%s\nwant:\n%s", r.out, strings.Join(want, "\n"))
	}
	r = runAimi(context.Background(), nil, nil, "swarm", "logs", "aimi-a", "--json", "--repo", repo, "--socket", sock)
	if n := strings.Count(r.out, "\n"); r.code != 0 || n != len(recs) {
		t.Fatalf("--json: exit %d, %d lines", r.code, n)
	}
	var first state.Record
	if err := json.Unmarshal([]byte(strings.Split(r.out, "\n")[0]), &first); err != nil || first.Seq != 1 {
		t.Errorf("--json first record %+v %v", first, err)
	}
	// --tail and --since are the daemon's to apply (it reads the journal
	// from its end); a duration is back from now.
	before := time.Now()
	r = runAimi(context.Background(), nil, nil, "swarm", "logs", "aimi-a", "--tail", "3", "--since", "10m", "--repo", repo, "--socket", sock)
	if r.code != 0 || gotReq.Tail != 3 || gotReq.Since.Before(before.Add(-10*time.Minute-time.Second)) || gotReq.Since.After(time.Now().Add(-10*time.Minute)) {
		t.Errorf("--tail 3 --since 10m: exit %d, the daemon was asked %+v", r.code, gotReq)
	}
	r = runAimi(context.Background(), nil, nil, "swarm", "logs", "aimi-a", "--since", "2026-11-22T10:31:05Z", "--repo", repo, "--socket", sock)
	if r.code != 0 || !gotReq.Since.Equal(at) || gotReq.Tail != 0 {
		t.Errorf("--since a time: exit %d, the daemon was asked %+v", r.code, gotReq)
	}
	for _, bad := range [][]string{{"--tail", "-1"}, {"--since", "yesterday"}, {"--since", "-5m"}} {
		r = runAimi(context.Background(), nil, nil, append([]string{"swarm", "logs", "aimi-a", "--repo", repo, "--socket", sock}, bad...)...)
		if r.code != ExitUsage || !strings.Contains(r.err, bad[0]) {
			t.Errorf("%v: exit %d %s, want a usage error naming the flag", bad, r.code, r.err)
		}
	}
}

func TestSwarmEventsStreamsUntilInterrupted(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			// A server per case: a finished stream's subscriber must not
			// take the next case's events.
			fake := &daemontest.Swarms{Events: make(chan api.Event)}
			sock, _ := daemontest.Serve(t, fake)
			ctx, cancel := context.WithCancel(context.Background())
			out := &syncBuffer{}
			done := make(chan result)
			args := []string{"swarm", "events", "--repo", repo, "--socket", sock}
			if asJSON {
				args = append(args, "--json")
			}
			go func() { done <- runAimi(ctx, nil, out, args...) }()
			at := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
			fake.Events <- api.Event{Time: at, RepoPath: "/elsewhere", Kind: api.EventProgress, ContainerName: "aimi-other"}
			fake.Events <- api.Event{Time: at, RepoPath: repo, Kind: api.EventProgress, ContainerName: "aimi-a", Status: "running", StoryID: "US-001", StoryStatus: "completed", Output: "done"}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "US-001") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			r := <-done
			if r.code != 0 || strings.Contains(r.out, "aimi-other") {
				t.Fatalf("exit %d: %q %q", r.code, r.out, r.err)
			}
			if !asJSON && strings.TrimSpace(r.out) != "10:00:01.000 progress aimi-a running US-001 completed: done" {
				t.Errorf("line %q", r.out)
			}
			if asJSON {
				var e api.Event
				if err := json.Unmarshal([]byte(r.out), &e); err != nil || e.StoryID != "US-001" {
					t.Errorf("json %q: %v", r.out, err)
				}
			}
		})
	}
}

// settling is a fake whose one container is completed from the first
// call, but which the daemon finishes (exit, publish) only from call
// finishedAt on.
func settling(repo string, finishedAt int32, calls *atomic.Int32) *daemontest.Swarms {
	view := func() api.SwarmView {
		n := calls.Add(1)
		c := ctr("aimi-a", state.StatusCompleted, 2, 2)
		v := swarmView(repo, c)
		v.Containers = []api.ContainerDetail{{Name: c.ContainerName, Status: string(c.Status), Finished: n >= finishedAt}}
		return v
	}
	return &daemontest.Swarms{
		StartFunc:  func(api.StartRequest) (api.SwarmView, error) { return view(), nil },
		StatusFunc: func(string) (api.SwarmView, error) { return view(), nil },
	}
}

func TestSwarmStartFollowWaitsUntilTheDaemonIsFinishedWithTheContainers(t *testing.T) {
	// Terminal by its completion is not yet done: the branch is published
	// after the process exits, and the command should return after that.
	repo := taskRepo(t, "a-tasks.json")
	var calls atomic.Int32
	sock, _ := daemontest.Serve(t, settling(repo, 5, &calls))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := runAimi(ctx, nil, nil, "swarm", "start", "--all", "--follow", "--refresh", "10ms", "--repo", repo, "--socket", sock)
	if r.code != 0 || r.err != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if n := calls.Load(); n < 5 {
		t.Errorf("follow returned after %d status calls, before the daemon had finished with the container", n)
	}
}

func TestFollowGivesUpWaitingForTheDaemonAfterSettle(t *testing.T) {
	// A runner that hangs after its completion must not hold the command.
	repo := taskRepo(t, "a-tasks.json")
	var calls atomic.Int32
	sock, _ := daemontest.Serve(t, settling(repo, 1<<30, &calls))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	client := daemon.NewClient(sock)
	defer client.Close()
	err := followSwarm(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, client, repo, 10*time.Millisecond, 100*time.Millisecond)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("followSwarm = %v (ctx %v), want nil well before the deadline", err, ctx.Err())
	}
	if !strings.Contains(errb.String(), "still finishing aimi-a") {
		t.Errorf("stderr %q, want a note that the daemon is still finishing aimi-a", errb.String())
	}
}

func TestSwarmStartFollowWhenTheDaemonGoesAwayExits3(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	fake := progressing(repo, []*state.Container{ctr("aimi-a", state.StatusRunning, 0, 2)})
	sock, srv := daemontest.Serve(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &syncBuffer{}
	done := make(chan result)
	go func() {
		done <- runAimi(ctx, nil, out, "swarm", "start", "--all", "--follow", "--refresh", "20ms", "--repo", repo, "--socket", sock)
	}()
	for !strings.Contains(out.String(), "aimi-a running") && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != ExitDaemon || !strings.Contains(r.err, "aimid &") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
}

func TestTTYRendererCutsLinesToTheTerminalWidth(t *testing.T) {
	var b bytes.Buffer
	r := &ttyRenderer{w: &b, width: 30}
	v := swarmView("/r", ctr("aimi-a-very-long-container-name-indeed", state.StatusRunning, 1, 2))
	r.render(v)
	r.render(v)
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		l = strings.TrimPrefix(l, "\x1b[2A\x1b[J")
		if n := len([]rune(l)); n >= 30 {
			t.Errorf("line of %d runes wraps a 30-column terminal: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "\x1b[2A\x1b[J") {
		t.Errorf("second drawing does not move up over the first: %q", b.String())
	}
}
