package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
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
