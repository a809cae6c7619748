package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

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
			if r.code != 0 || strings.Contains(r.out, "aimi-other") || strings.TrimSpace(r.err) != EventsFollowing {
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
