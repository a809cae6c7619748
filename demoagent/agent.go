package demoagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/aimi-tools/swarm/contract"
)

// Markers recognized in a prompt.
const (
	MarkerFail         = "[demo:fail]"
	MarkerSlow         = "[demo:slow]"
	MarkerIgnoreCancel = "[demo:ignore-cancel]"
	// MarkerAskExec makes the agent ask permission (kind execute) before
	// its terminal command too; rejected, it skips the command.
	MarkerAskExec = "[demo:ask-exec]"
	// MarkerRefuseFix makes the agent refuse a land's fix-up whose prompt
	// quotes it (a story's criteria carry it); its own story runs as usual.
	MarkerRefuseFix = "[demo:refuse-fix]"
	// MarkerSlowFix makes the agent take slowFixFor over a land's fix-up
	// whose prompt quotes it (a test stops the daemon meanwhile).
	MarkerSlowFix = "[demo:slow-fix]"
	// MarkerCost makes the agent report that its turn cost DemoCost (ACP
	// usage_update), as a model-backed agent does: a test of what the
	// daemon counts finds a cost where the demo agent has none.
	MarkerCost = "[demo:cost]"
	// MarkerAttempt makes the file the agent writes depend on its attempt
	// (AIMI_ATTEMPT, best of N): attempt K adds K lines "attempt K".
	MarkerAttempt = "[demo:attempt]"
	// MarkerSlowAttempt followed by a number K and "]" makes attempt K
	// take its time as [demo:slow] does ([demo:slow-attempt-3]).
	MarkerSlowAttempt = "[demo:slow-attempt-"
)

// DemoCost is the cost in USD a turn whose prompt carries MarkerCost
// reports.
const DemoCost = 0.0125

// slowFixFor is how long [demo:slow-fix] waits before it resolves.
const slowFixFor = 20 * time.Second

// slowFor is how long [demo:slow] waits: long enough for any test to stop
// the runner mid-story, short enough that a forgotten marker ends eventually.
const slowFor = 60 * time.Second

// LogSlow is the debug log message of a [demo:slow] turn entering its
// wait: a test that stops the agent mid-story waits for it in the log.
const LogSlow = "demo agent taking its time"

var (
	fileRe  = regexp.MustCompile(`(?i)\bfile\s+([A-Za-z0-9_.][A-Za-z0-9_./-]*)\s+exists`)
	storyRe = regexp.MustCompile(`\bUS-\d{3}\b`)
)

// Run serves one ACP connection on r/w (the agent's stdin/stdout) until the
// client disconnects or ctx ends.
func Run(ctx context.Context, r io.Reader, w io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	a := &agent{sessions: map[acp.SessionId]string{}, log: log}
	// The SDK's constructor starts reading before it has stored its own
	// fields (and before a.conn is set): hold the input back until both are
	// written, or the first request races with them. No conn.SetLogger for
	// the same reason; the SDK logs to slog.Default().
	g := gate(r)
	conn := acp.NewAgentSideConnection(a, w, g)
	a.conn = conn
	g.open()
	select {
	case <-conn.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedReader blocks reads until open is called.
type gatedReader struct {
	r     io.Reader
	ready chan struct{}
}

func gate(r io.Reader) *gatedReader { return &gatedReader{r: r, ready: make(chan struct{})} }

func (g *gatedReader) open() { close(g.ready) }

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.ready
	return g.r.Read(p)
}

type agent struct {
	conn     *acp.AgentSideConnection
	log      *slog.Logger
	mu       sync.Mutex
	sessions map[acp.SessionId]string // session -> cwd
	next     int
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{},
		AgentInfo:         &acp.Implementation{Name: "aimi-demo-agent", Version: "1"},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{"cwd": p.Cwd, "error": "cwd must be absolute"})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	id := acp.SessionId(fmt.Sprintf("demo-%d", a.next))
	a.sessions[id] = p.Cwd
	return acp.NewSessionResponse{SessionId: id}, nil
}

// Cancel needs no work: the SDK cancels the running Prompt's context.
func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	delete(a.sessions, p.SessionId)
	a.mu.Unlock()
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// Prompt runs one deterministic turn.
func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.mu.Lock()
	cwd, ok := a.sessions[p.SessionId]
	a.mu.Unlock()
	if !ok {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": p.SessionId, "error": "unknown session"})
	}
	var text strings.Builder
	for _, b := range p.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
			text.WriteString("\n")
		}
	}
	t := &turn{a: a, sid: p.SessionId, cwd: cwd, prompt: ownPart(text.String())}
	reason, err := t.run(ctx)
	if err == nil && strings.Contains(t.prompt, MarkerCost) {
		err = t.update(ctx, acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{SessionUpdate: "usage_update", Cost: &acp.Cost{Amount: DemoCost, Currency: "USD"}}})
	}
	if err != nil {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: reason}, nil
}

// DependencySection starts the part of the runner's prompt that quotes the
// story's dependencies (their notes may carry markers of their own).
const DependencySection = "This story builds on:"

// ownPart is the prompt up to the dependency section: markers and file names
// count only when they belong to the story being prompted.
func ownPart(prompt string) string {
	if i := strings.Index(prompt, DependencySection); i >= 0 {
		return prompt[:i]
	}
	return prompt
}

type turn struct {
	a      *agent
	sid    acp.SessionId
	cwd    string
	prompt string
}

func (t *turn) say(ctx context.Context, s string) error {
	return t.a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: t.sid, Update: acp.UpdateAgentMessageText(s)})
}

func (t *turn) update(ctx context.Context, u acp.SessionUpdate) error {
	return t.a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: t.sid, Update: u})
}

func (t *turn) run(ctx context.Context) (acp.StopReason, error) {
	story := storyRe.FindString(t.prompt)
	if story == "" {
		story = "story"
	}
	target := story + ".md"
	if m := fileRe.FindStringSubmatch(t.prompt); m != nil {
		target = filepath.Clean(m[1])
	}
	if err := t.say(ctx, fmt.Sprintf("Demo agent (no model) working on %s. ", story)); err != nil {
		return "", err
	}
	if files := contract.NoMarkerPattern.FindAllStringSubmatch(t.prompt, -1); files != nil {
		return t.resolveAll(ctx, story, files)
	}
	if strings.Contains(t.prompt, MarkerFail) {
		if err := t.say(ctx, fmt.Sprintf("The story carries %s, so I refuse it without changing anything.", MarkerFail)); err != nil {
			return "", err
		}
		return acp.StopReasonRefusal, nil
	}
	plan := []acp.PlanEntry{
		{Content: "Write " + target, Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusInProgress},
		{Content: "Check the working tree", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
	}
	if err := t.update(ctx, acp.UpdatePlan(plan...)); err != nil {
		return "", err
	}
	if strings.Contains(t.prompt, MarkerSlow) || t.slowAttempt() {
		if err := t.dawdle(ctx); err != nil {
			return "", err
		}
	}
	if stop, err := t.edit(ctx, story, target); stop != "" || err != nil {
		return stop, err
	}
	status, err := t.check(ctx, story)
	if err != nil {
		return "", err
	}
	plan[0].Status, plan[1].Status = acp.PlanEntryStatusCompleted, acp.PlanEntryStatusCompleted
	if err := t.update(ctx, acp.UpdatePlan(plan...)); err != nil {
		return "", err
	}
	changed := len(strings.Fields(status)) / 2
	if err := t.say(ctx, fmt.Sprintf("I wrote %s and checked the working tree (%d changed path(s)).", target, changed)); err != nil {
		return "", err
	}
	return acp.StopReasonEndTurn, nil
}

// dawdle waits slowFor, or until ctx ends unless the prompt asks to ignore
// cancellation.
func (t *turn) dawdle(ctx context.Context) error {
	wait := ctx
	if strings.Contains(t.prompt, MarkerIgnoreCancel) {
		wait = context.WithoutCancel(ctx)
	}
	if err := t.say(ctx, "Taking my time ("+MarkerSlow+"). "); err != nil && wait == ctx {
		return err
	}
	t.a.log.Debug(LogSlow, "for", slowFor, "ignore_cancel", wait != ctx)
	select {
	case <-wait.Done():
		return wait.Err()
	case <-time.After(slowFor):
		return nil
	}
}

// edit announces the write of target, asks for permission, writes and reads
// it back. A non-empty stop reason ends the turn there.
func (t *turn) edit(ctx context.Context, story, target string) (acp.StopReason, error) {
	path := filepath.Join(t.cwd, target)
	editID := acp.ToolCallId("write-" + story)
	content := fmt.Sprintf("# %s\n\nWritten by the aimi demo agent for %s.\n", target, story) + t.attemptLines()
	if err := t.update(ctx, acp.StartEditToolCall(editID, "Write "+target, path, content)); err != nil {
		return "", err
	}
	perm, err := t.a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: t.sid,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: editID,
			Title:      acp.Ptr("Write " + target),
			Kind:       acp.Ptr(acp.ToolKindEdit),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
			Locations:  []acp.ToolCallLocation{{Path: path}},
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	if err != nil {
		return "", fmt.Errorf("demo agent: permission request: %w", err)
	}
	if perm.Outcome.Cancelled != nil {
		return acp.StopReasonCancelled, nil
	}
	if perm.Outcome.Selected == nil || perm.Outcome.Selected.OptionId != "allow" {
		_ = t.update(ctx, acp.UpdateToolCall(editID, acp.WithUpdateStatus(acp.ToolCallStatusFailed)))
		if err := t.say(ctx, "Permission to write "+target+" was rejected, so I cannot do this story."); err != nil {
			return "", err
		}
		return acp.StopReasonRefusal, nil
	}
	if _, err := t.a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: path, Content: content}); err != nil {
		_ = t.update(ctx, acp.UpdateToolCall(editID, acp.WithUpdateStatus(acp.ToolCallStatusFailed)))
		if err := t.say(ctx, fmt.Sprintf("Writing %s failed: %v.", target, err)); err != nil {
			return "", err
		}
		return acp.StopReasonRefusal, nil
	}
	if _, err := t.a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: path, Line: acp.Ptr(1), Limit: acp.Ptr(1)}); err != nil {
		return "", fmt.Errorf("demo agent: read back %s: %w", target, err)
	}
	return "", t.update(ctx, acp.UpdateToolCall(editID, acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
}

// check runs git status in the workspace through terminal/* and returns
// its output (or what went wrong, which the tool call reports as failed).
func (t *turn) check(ctx context.Context, story string) (string, error) {
	execID := acp.ToolCallId("status-" + story)
	if err := t.update(ctx, acp.StartToolCall(execID, "git status --short", acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusInProgress))); err != nil {
		return "", err
	}
	if strings.Contains(t.prompt, MarkerAskExec) {
		allowed, err := t.askExec(ctx, execID)
		if err != nil || !allowed {
			_ = t.update(ctx, acp.UpdateToolCall(execID, acp.WithUpdateStatus(acp.ToolCallStatusFailed)))
			return "(git status not run: permission rejected)", err
		}
	}
	status, err := t.terminal(ctx, "git", "status", "--short")
	st := acp.ToolCallStatusCompleted
	if err != nil {
		st = acp.ToolCallStatusFailed
		status = err.Error()
	}
	if err := t.update(ctx, acp.UpdateToolCall(execID, acp.WithUpdateStatus(st))); err != nil {
		return "", err
	}
	return status, nil
}

// askExec asks permission to run the working tree check.
func (t *turn) askExec(ctx context.Context, id acp.ToolCallId) (bool, error) {
	perm, err := t.a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: t.sid,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: id,
			Title:      acp.Ptr("Run git status --short"),
			Kind:       acp.Ptr(acp.ToolKindExecute),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
			RawInput:   map[string]any{"command": "git status --short"},
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Run it", OptionId: "run"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Skip it", OptionId: "skip"},
		},
	})
	if err != nil {
		return false, fmt.Errorf("demo agent: permission request: %w", err)
	}
	return perm.Outcome.Selected != nil && perm.Outcome.Selected.OptionId == "run", nil
}

// terminal runs one command through terminal/create, wait_for_exit, output
// and release, and returns its output.
func (t *turn) terminal(ctx context.Context, cmd string, args ...string) (string, error) {
	c := t.a.conn
	term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: t.sid, Command: cmd, Args: args, Cwd: acp.Ptr(t.cwd), OutputByteLimit: acp.Ptr(4096)})
	if err != nil {
		return "", fmt.Errorf("create terminal: %w", err)
	}
	defer func() {
		_, _ = c.ReleaseTerminal(context.WithoutCancel(ctx), acp.ReleaseTerminalRequest{SessionId: t.sid, TerminalId: term.TerminalId})
	}()
	exit, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: t.sid, TerminalId: term.TerminalId})
	if err != nil {
		return "", fmt.Errorf("wait for terminal: %w", err)
	}
	out, err := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: t.sid, TerminalId: term.TerminalId})
	if err != nil {
		return "", fmt.Errorf("terminal output: %w", err)
	}
	if exit.ExitCode == nil || *exit.ExitCode != 0 {
		return out.Output, fmt.Errorf("%s exited abnormally: %s", cmd, strings.TrimSpace(out.Output))
	}
	return out.Output, nil
}
