package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/fixtures"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/tasks"
	"github.com/google/uuid"
)

const (
	diamond = "2026-11-20-diamond-tasks.json"
	linear  = "2026-11-20-linear-tasks.json"
)

// fixture reads a valid task file from the repository's fixtures.
func fixture(t *testing.T, name string) *tasks.File {
	t.Helper()
	data := fixtures.Read(t, "tasks/valid/"+name)
	var f tasks.File
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

type scenario struct {
	srv      *gittest.Server
	taskPath string
	branch   string
	cfg      Config
	swarmID  string
}

// newScenario serves a repository holding the task file and prepares a
// demo-agent config with an empty workspace.
func newScenario(t *testing.T, f *tasks.File, token string) *scenario {
	t.Helper()
	data, err := marshalTaskFile(f)
	if err != nil {
		t.Fatal(err)
	}
	taskPath := ".aimi/tasks/test-tasks.json"
	srv := gittest.New(t, token, map[string]string{taskPath: string(data), "README.md": "test repo\n"})
	// GORACE: a -race child sleeps a second at exit by default.
	env := append(os.Environ(), envDemoAgent+"=1", "GORACE=atexit_sleep_ms=0", "GIT_SSL_CAINFO="+srv.CAFile, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &scenario{
		srv: srv, taskPath: taskPath, branch: f.Metadata.BranchName, swarmID: uuid.NewString(),
		cfg: Config{
			Agent:       AgentDemo,
			DemoCommand: []string{self},
			Workspace:   filepath.Join(t.TempDir(), "workspace"),
			StopGrace:   5 * time.Second,
			GitToken:    token,
			Env:         env,
			Logger:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (s *scenario) request(t *testing.T) string {
	t.Helper()
	return s.requestWith(t, func(*acpmsg.TaskRequest) {})
}

// requestWith is request with the payload changed by edit.
func (s *scenario) requestWith(t *testing.T, edit func(*acpmsg.TaskRequest)) string {
	t.Helper()
	p := &acpmsg.TaskRequest{
		TaskFilePath: s.taskPath, BranchName: s.branch, RepoURL: s.srv.URL, EnvVars: map[string]string{"STORY_ENV": "yes"},
	}
	edit(p)
	m := acpmsg.NewMessage(acpmsg.TypeTaskRequest, s.swarmID, "abc123def456", p)
	b, err := acpmsg.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// parseAll checks that every line the runner printed validates with acpmsg
// and that exactly one final message (completion or error) ends the stream.
func parseAll(t *testing.T, out string) []acpmsg.Message {
	t.Helper()
	var msgs []acpmsg.Message
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			t.Fatalf("line %d is empty; stdout %q", i+1, out)
		}
		m, err := acpmsg.ParseFromContainer([]byte(line))
		if err != nil {
			t.Fatalf("line %d does not validate: %v\n%s", i+1, err, line)
		}
		msgs = append(msgs, m)
	}
	finals := 0
	for i, m := range msgs {
		if m.Type == acpmsg.TypeCompletion || m.Type == acpmsg.TypeError {
			finals++
			if i != len(msgs)-1 {
				t.Fatalf("final message %s is not last", m.Type)
			}
		}
	}
	if finals != 1 {
		t.Fatalf("want exactly one completion or error, got %d in\n%s", finals, out)
	}
	return msgs
}

func runScenario(t *testing.T, ctx context.Context, s *scenario, stdin string) (int, []acpmsg.Message) {
	t.Helper()
	var out syncbuf.Buffer
	code := Run(ctx, s.cfg, strings.NewReader(stdin), &out)
	return code, parseAll(t, out.String())
}

type progress struct{ story, status, output string }

func progressOf(msgs []acpmsg.Message) []progress {
	var out []progress
	for _, m := range msgs {
		if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok {
			out = append(out, progress{p.StoryID, p.Status, p.Output})
		}
	}
	return out
}

func completionOf(t *testing.T, msgs []acpmsg.Message) *acpmsg.Completion {
	t.Helper()
	c, ok := msgs[len(msgs)-1].Payload.(*acpmsg.Completion)
	if !ok {
		t.Fatalf("last message is %s, want completion: %+v", msgs[len(msgs)-1].Type, msgs[len(msgs)-1].Payload)
	}
	return c
}

// checkOrder asserts that no story starts before its dependencies finished
// and that at most limit stories are in progress at once; it returns the
// highest concurrency seen.
func checkOrder(t *testing.T, f *tasks.File, ps []progress, limit int) int {
	t.Helper()
	finished := map[string]bool{}
	deps := map[string][]string{}
	for _, s := range f.UserStories {
		deps[s.ID] = s.DependsOn
		finished[s.ID] = s.Status == tasks.Completed || s.Status == tasks.Skipped
	}
	running, peak := 0, 0
	for _, p := range ps {
		switch p.status {
		case acpmsg.StoryInProgress:
			for _, d := range deps[p.story] {
				if !finished[d] {
					t.Errorf("%s started before its dependency %s finished", p.story, d)
				}
			}
			running++
			peak = max(peak, running)
		case acpmsg.StoryCompleted, acpmsg.StoryFailed:
			running--
			finished[p.story] = true
		}
	}
	if peak > limit {
		t.Errorf("%d stories ran at once, limit %d", peak, limit)
	}
	return peak
}

func finalStatuses(t *testing.T, s *scenario) map[string]tasks.Status {
	t.Helper()
	var f tasks.File
	if err := json.Unmarshal([]byte(s.srv.Show(t, s.branch, s.taskPath)), &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]tasks.Status{}
	for _, st := range f.UserStories {
		out[st.ID] = st.Status
	}
	return out
}

func TestRunDiamondRunsIndependentStoriesConcurrently(t *testing.T) {
	// US-002 and US-003 are both slow; with maxConcurrency 2 they must
	// overlap. Stopping after both started ends the run.
	f := fixture(t, diamond)
	f.UserStories[1].Notes = "[demo:slow]"
	f.UserStories[2].Notes = "[demo:slow]"
	s := newScenario(t, f, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out) }()
	testwait.Eventually(t, 30*time.Second, "3 stories in progress", func() error {
		if o := out.String(); strings.Count(o, `"status":"in_progress"`) < 3 {
			return fmt.Errorf("output:\n%s", o)
		}
		return nil
	}, every)
	cancel()
	<-done
	msgs := parseAll(t, out.String())
	if peak := checkOrder(t, f, progressOf(msgs), 2); peak != 2 {
		t.Fatalf("peak concurrency %d, want 2", peak)
	}
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionStopped {
		t.Fatalf("completion %+v", c)
	}
}

// every is how often this package's tests poll what a run wrote.
var every = testwait.Every(20 * time.Millisecond)

// contains is a testwait condition: nil once s holds sub, else s.
func contains(s, sub string) error {
	if !strings.Contains(s, sub) {
		return fmt.Errorf("no %q in:\n%s", sub, s)
	}
	return nil
}

func TestStopMidStory(t *testing.T) {
	cases := []struct {
		name  string
		notes string
		grace time.Duration
	}{
		{"agent honours session/cancel", "[demo:slow]", 5 * time.Second},
		{"agent ignoring the cancel is killed after the grace period", "[demo:slow] [demo:ignore-cancel]", 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(t, linear)
			f.UserStories[1].Notes = tc.notes
			s := newScenario(t, f, "")
			s.cfg.StopGrace = tc.grace
			slow := filepath.Join(t.TempDir(), "slow")
			s.cfg.Env = append(s.cfg.Env, envSlowMarker+"="+slow)
			var mu sync.Mutex
			var pids []int
			s.cfg.onAgentStart = func(pid int) { mu.Lock(); pids = append(pids, pid); mu.Unlock() }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out syncbuf.Buffer
			done := make(chan int, 1)
			go func() { done <- Run(ctx, s.cfg, strings.NewReader(s.request(t)), &out) }()
			testwait.Eventually(t, 30*time.Second, "US-002 in progress", func() error {
				return contains(out.String(), `"storyId":"US-002","status":"in_progress"`)
			}, every)
			testwait.Eventually(t, 10*time.Second, "2 agent pids", func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(pids) != 2 {
					return fmt.Errorf("pids %v", pids)
				}
				return nil
			}, every)
			testwait.Eventually(t, 10*time.Second, "the slow story's file", func() error { _, err := os.Stat(slow); return err }, every)
			cancel()
			var code int
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("runner did not stop")
			}
			msgs := parseAll(t, out.String())
			c := completionOf(t, msgs)
			if c.Status != acpmsg.CompletionStopped || code != ExitOK {
				t.Fatalf("completion %+v exit %d", c, code)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, pid := range pids {
				if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("agent process group %d still exists (kill 0: %v)", pid, err)
				}
			}
			got := finalStatuses(t, s)
			if got["US-001"] != tasks.Completed || got["US-002"] != tasks.Pending || got["US-003"] != tasks.Pending {
				t.Errorf("pushed task file %v: want US-001 completed, the stopped story and its dependents pending", got)
			}
			for _, p := range progressOf(msgs) {
				if p.story != "US-001" && p.status != acpmsg.StoryInProgress {
					t.Errorf("unexpected %s %s after stop", p.story, p.status)
				}
			}
		})
	}
}

func TestRunErrorsBeforeWorkBegins(t *testing.T) {
	valid := fixture(t, linear)
	cases := []struct {
		name    string
		token   string // server token
		cfgTok  string // runner token
		stdin   func(s *scenario) string
		file    func(s *scenario)
		want    string
		wantMsg string
	}{
		{name: "empty stdin", stdin: func(*scenario) string { return "" }, want: acpmsg.CodeInvalidInput},
		{name: "not json", stdin: func(*scenario) string { return "hello\n" }, want: acpmsg.CodeInvalidInput},
		{name: "oversized line", stdin: func(*scenario) string { return strings.Repeat("x", acpmsg.MaxLineBytes+10) + "\n" }, want: acpmsg.CodeInvalidInput},
		{name: "wrong message type", stdin: func(s *scenario) string {
			b, _ := acpmsg.Marshal(acpmsg.NewMessage(acpmsg.TypeCompletion, s.swarmID, "c1", &acpmsg.Completion{Status: "completed", Errors: []string{}}))
			return string(b) + "\n"
		}, want: acpmsg.CodeInvalidInput},
		{name: "task file path with dot-dot", stdin: func(s *scenario) string {
			return strings.Replace(s.request(&testing.T{}), s.taskPath, "../../etc/x.json", 1)
		}, want: acpmsg.CodeTaskFileInvalid},
		{name: "task file missing on the branch", stdin: func(s *scenario) string {
			return strings.Replace(s.request(&testing.T{}), s.taskPath, ".aimi/tasks/nope-tasks.json", 1)
		}, want: acpmsg.CodeTaskFileNotFound},
		{name: "task file invalid", stdin: func(s *scenario) string {
			return strings.Replace(s.request(&testing.T{}), s.taskPath, "README.json", 1)
		}, file: func(s *scenario) {}, want: acpmsg.CodeTaskFileInvalid},
		{name: "task file over the cap", want: acpmsg.CodeTaskFileInvalid, wantMsg: "too large"},
		{name: "clone of a missing repository", stdin: func(s *scenario) string {
			return strings.Replace(s.request(&testing.T{}), s.srv.URL, s.srv.URL+"-missing", 1)
		}, want: acpmsg.CodeGitCloneFailed},
		{name: "clone with a wrong token fails and never shows it", token: "right-token", cfgTok: "wrong-secret-token", want: acpmsg.CodeGitCloneFailed, wantMsg: "clone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, valid, tc.token)
			s.cfg.GitToken = tc.cfgTok
			if tc.name == "task file invalid" {
				// Serve a repository whose README.json is not a task file.
				srv := gittest.New(t, "", map[string]string{"README.json": `{"schemaVersion":"2.0"}`})
				s.srv = srv
				s.cfg.Env = append(s.cfg.Env, "GIT_SSL_CAINFO="+srv.CAFile)
			}
			if tc.name == "task file over the cap" {
				// A valid task file, padded past the cap the daemon reads with.
				data, err := marshalTaskFile(valid)
				if err != nil {
					t.Fatal(err)
				}
				data = append(data, bytes.Repeat([]byte(" "), tasks.MaxFileBytes+1-len(data))...)
				srv := gittest.New(t, "", map[string]string{s.taskPath: string(data)})
				s.srv = srv
				s.cfg.Env = append(s.cfg.Env, "GIT_SSL_CAINFO="+srv.CAFile)
			}
			in := s.request(t)
			if tc.stdin != nil {
				in = tc.stdin(s)
			}
			var out, logs syncbuf.Buffer
			s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			code := Run(context.Background(), s.cfg, strings.NewReader(in), &out)
			msgs := parseAll(t, out.String())
			if len(msgs) != 1 {
				t.Fatalf("want one error message, got %d", len(msgs))
			}
			e, ok := msgs[0].Payload.(*acpmsg.ErrorPayload)
			if !ok || e.Code != tc.want || code == ExitOK {
				t.Fatalf("got %+v exit %d, want code %s", msgs[0].Payload, code, tc.want)
			}
			if !strings.Contains(e.Message, tc.wantMsg) {
				t.Errorf("message %q lacks %q", e.Message, tc.wantMsg)
			}
			if tc.cfgTok != "" && (strings.Contains(out.String(), tc.cfgTok) || strings.Contains(logs.String(), tc.cfgTok)) {
				t.Fatal("the git token leaked into stdout or logs")
			}
		})
	}
}

func TestStopBeforeTheRequestArrives(t *testing.T) {
	pr, pw := io.Pipe() // stdin stays open and silent, as with the daemon's attach
	defer pw.Close()
	reading := make(chan struct{})
	stdin := &firstRead{r: pr, reading: reading}
	var out syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, Config{Workspace: t.TempDir(), SwarmID: uuid.NewString(), ContainerID: "abc", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, stdin, &out)
	}()
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner never read its stdin")
	}
	cancel()
	select {
	case code := <-done:
		msgs := parseAll(t, out.String())
		if c := completionOf(t, msgs); c.Status != acpmsg.CompletionStopped || code != ExitOK {
			t.Fatalf("%+v exit %d", c, code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stop while waiting for the request hangs")
	}
}

func TestRunClonesAndPushesWithToken(t *testing.T) {
	f := fixture(t, linear)
	f.UserStories = f.UserStories[:1]
	s := newScenario(t, f, "s3cret-token")
	var logs syncbuf.Buffer
	s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var out syncbuf.Buffer
	code := Run(context.Background(), s.cfg, strings.NewReader(s.request(t)), &out)
	msgs := parseAll(t, out.String())
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 || code != ExitOK {
		t.Fatalf("completion %+v", c)
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Completed {
		t.Fatalf("statuses %v", got)
	}
	for _, where := range []string{out.String(), logs.String()} {
		if strings.Contains(where, "s3cret-token") {
			t.Fatal("token leaked")
		}
	}
	cfgFile, _ := os.ReadFile(filepath.Join(s.cfg.Workspace, ".git", "config"))
	if bytes.Contains(cfgFile, []byte("s3cret")) || bytes.Contains(cfgFile, []byte("extraHeader")) {
		t.Fatal("credentials persisted in .git/config")
	}
}

func TestChildEnvDropsGitToken(t *testing.T) {
	env := childEnv([]string{"A=1", contract.EnvGitToken + "=x"}, map[string]string{"B": "2", contract.EnvGitToken: "y"})
	if got := strings.Join(env, " "); got != "A=1 B=2" {
		t.Fatalf("env %q", got)
	}
}

func TestBuildPromptCarriesStoryAndDependencyOutcomes(t *testing.T) {
	f := fixture(t, diamond)
	f.UserStories[0].Status = tasks.Completed
	f.UserStories[0].Notes = "[aimi] completed: wrote step-1.txt"
	p := buildPrompt(f, f.UserStories[1], ".aimi/tasks/x.json")
	for _, want := range []string{"US-002: Story 2", "want step 2", "- File step-2.txt exists", "US-001 \"Story 1\": completed", "wrote step-1.txt", "Do not edit .aimi/tasks/x.json"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	_ = fmt.Sprint()
}
