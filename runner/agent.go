package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/usage"
	acp "github.com/coder/acp-go-sdk"
)

// outcome is how one agent turn on one story ended.
type outcome struct {
	stop    acp.StopReason   // set when the agent answered the prompt
	summary string           // one paragraph from the agent's stream
	err     error            // the agent could not be driven (crash, protocol error)
	stalled string           // the watchdog's evidence when it cancelled a stalled or looping turn
	cost    *usage.AgentCost // what the agent reported the session cost (ACP usage_update)
}

// backend drives one story in dir (the workspace, or the story's own
// worktree when stories run concurrently). Cancelling ctx means "stop the run": the backend
// cancels the turn the way its protocol wants, waits at most the stop grace
// period, and reports acp.StopReasonCancelled.
type backend interface {
	runStory(ctx context.Context, storyID, prompt, dir string) outcome
}

// processExitWait is how long an agent gets to exit by itself after its stdin
// closes (and again after SIGTERM) before its process group is killed.
const processExitWait = time.Second

// outputDrainWait bounds how long, once an agent's process has exited, its
// output still in the pipe may take to reach our stderr. That stderr is the
// container's, which the daemon holds back while it journals a burst, so
// the last pipe-full can take seconds to go out: cut at a second, it was
// lost. A grandchild that keeps the pipe open is ended sooner by the
// process-group kill that follows every story.
const outputDrainWait = 30 * time.Second

// stderrExcerpt is how much of the end of an agent's stderr a crash report
// quotes.
const stderrExcerpt = 600

// tailWriter keeps the last bytes written (agent stderr, exec output) for
// failure summaries.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 2*w.max {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.ToValidUTF8(string(w.buf), "")
}

// process is an agent subprocess in its own process group.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *tailWriter
}

func startProcess(argv []string, dir string, env []string, stdin io.Reader, stdout io.Writer, log *slog.Logger) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	p := &process{cmd: cmd, exited: make(chan struct{}), stderr: &tailWriter{max: 4096}}
	// The agent's stderr is its log: keep a tail for failure summaries and
	// pass it on to ours (stdout is reserved for protocol lines).
	cmd.Stderr = io.MultiWriter(os.Stderr, p.stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild holding stderr open must not block Wait forever; what
	// the agent wrote before it exited is still passed on (outputDrainWait).
	cmd.WaitDelay = outputDrainWait
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := cmd.Wait()
		log.Debug("agent process exited", "pid", cmd.Process.Pid, "err", err)
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process group: wait briefly for a voluntary exit, then
// SIGTERM, then SIGKILL. The group is signalled even when the leader has
// exited, so helpers it spawned do not outlive the story.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.exited:
	case <-time.After(processExitWait):
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(processExitWait):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// acpBackend runs each story in a fresh agent process speaking ACP on its
// stdio: initialize, session/new in the workspace, one session/prompt.
type acpBackend struct {
	argv             []string
	env              []string
	policy           acpclient.Policy
	asker            func(storyID string) acpclient.Asker // nil: asked calls are rejected
	authMethod       string
	grace            time.Duration
	handshakeTimeout time.Duration
	stallTimeout     time.Duration // 0: no stall watchdog
	loopLimit        int           // 0: no loop check
	log              *slog.Logger
	onAgentStart     func(int)
}

func (b *acpBackend) runStory(ctx context.Context, storyID, prompt, dir string) outcome {
	log := b.log.With("story", storyID)
	var asker acpclient.Asker
	if b.asker != nil {
		asker = b.asker(storyID)
	}
	client, err := acpclient.New(acpclient.Config{Workspace: dir, Policy: b.policy, Asker: asker, Env: b.env, Logger: log})
	if err != nil {
		return outcome{err: err}
	}
	defer client.Close()

	// Plain os.Pipe pairs: exec.Cmd then copies nothing, and Wait never
	// closes the ends the SDK is still reading.
	inR, inW, err := os.Pipe()
	if err != nil {
		return outcome{err: fmt.Errorf("agent stdin pipe: %w", err)}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return outcome{err: fmt.Errorf("agent stdout pipe: %w", err)}
	}
	proc, err := startProcess(b.argv, dir, b.env, inR, outW, log)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return outcome{err: fmt.Errorf("start agent %q: %w (check %s)", b.argv[0], err, contract.EnvAgentCommand)}
	}
	log.Info("agent started", "pid", proc.cmd.Process.Pid, "command", b.argv[0])
	if b.onAgentStart != nil {
		b.onAgentStart(proc.cmd.Process.Pid)
	}
	defer func() {
		inW.Close() // EOF on the agent's stdin: ACP agents exit on it
		proc.stop()
		outR.Close()
	}()

	conn := client.Connect(inW, outR)
	crashed := func(step string, err error) outcome {
		if ferr := conn.Err(); ferr != nil {
			// The agent broke the framing; the SDK only saw a disconnect.
			return outcome{err: fmt.Errorf("agent %s: %w", step, ferr), summary: client.Transcript().Summary()}
		}
		var pe *acpclient.ProtocolError
		if errors.As(err, &pe) {
			return outcome{err: err, summary: client.Transcript().Summary()}
		}
		// The connection sees the agent's stdout close before Wait reaps the
		// process and drains its stderr: give the exit a moment to land so the
		// story says why the agent died.
		select {
		case <-proc.exited:
			err = fmt.Errorf("agent exited during %s (%v): %s", step, proc.cmd.ProcessState, lastWords(proc.stderr.String(), stderrExcerpt))
		case <-time.After(processExitWait):
			err = fmt.Errorf("agent %s: %w", step, err)
		}
		return outcome{err: err, summary: client.Transcript().Summary()}
	}
	// handshake bounds one step before the prompt: an agent that never
	// answers must not hold the story until the swarm's timeout.
	handshake := func(step string, call func(context.Context) error) (o outcome, failed bool) {
		if b.handshakeTimeout <= 0 {
			b.handshakeTimeout = DefaultHandshakeTimeout
		}
		hctx, cancel := context.WithTimeout(ctx, b.handshakeTimeout)
		defer cancel()
		err := call(hctx)
		switch {
		case err == nil:
			return outcome{}, false
		case ctx.Err() != nil:
			return outcome{stop: acp.StopReasonCancelled}, true
		case errors.As(err, new(*answered)):
			return outcome{err: err}, true
		case hctx.Err() != nil:
			return outcome{err: fmt.Errorf("the agent did not answer %s within %v (agent.handshake_timeout, %s): check that %s starts an ACP agent that speaks on stdin/stdout",
				step, b.handshakeTimeout, contract.EnvHandshakeTimeout, contract.EnvAgentCommand)}, true
		}
		return crashed(step, err), true
	}

	var initResp acp.InitializeResponse
	if o, failed := handshake("initialize", func(ctx context.Context) (err error) {
		initResp, err = conn.Initialize(ctx, acp.InitializeRequest{
			ProtocolVersion: acp.ProtocolVersionNumber,
			ClientCapabilities: acp.ClientCapabilities{
				Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
				Terminal: true,
			},
			ClientInfo: &acp.Implementation{Name: "aimi-acp-runner", Version: "1"},
		})
		return err
	}); failed {
		return o
	}
	if b.authMethod != "" {
		if o, failed := handshake("authenticate with "+b.authMethod, func(ctx context.Context) error {
			_, err := conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: b.authMethod})
			return err
		}); failed {
			return o
		}
	}
	var sess acp.NewSessionResponse
	if o, failed := handshake("session/new", func(ctx context.Context) (err error) {
		sess, err = conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
		var re *acp.RequestError
		if errors.As(err, &re) && re.Code == -32000 && b.authMethod == "" {
			return &answered{fmt.Errorf("the agent requires authentication: set %s to one of %v (and the credentials it needs)", contract.EnvAgentAuthMethod, authMethodIDs(initResp.AuthMethods))}
		}
		return err
	}); failed {
		return o
	}

	answers := make(chan promptAnswer, 1)
	go func() {
		// Not ctx: cancelling Prompt's context abandons the request and the
		// stop reason with it. A stop goes through session/cancel instead.
		r, err := conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{
			SessionId: sess.SessionId,
			Prompt:    []acp.ContentBlock{acp.TextBlock(prompt)},
		})
		answers <- promptAnswer{r, err}
	}()
	o := b.awaitTurn(ctx, log, client, conn, sess.SessionId, answers, crashed)
	if c, ok := client.Cost(); ok {
		if ac := (usage.AgentCost{Amount: c.Amount, Currency: c.Currency}); ac.Valid() {
			o.cost = &ac
			log.Info("agent-reported cost", "amount", ac.Amount, "currency", ac.Currency)
		}
	}
	return o
}

type promptAnswer struct {
	resp acp.PromptResponse
	err  error
}

// awaitTurn waits for the prompt's answer while the stall watchdog looks
// on; a stop (ctx) or a stall cancels the turn with session/cancel and
// waits at most the grace period for the agent to end it.
func (b *acpBackend) awaitTurn(ctx context.Context, log *slog.Logger, client *acpclient.Client, conn *acpclient.Conn,
	sid acp.SessionId, answers <-chan promptAnswer, crashed func(string, error) outcome) outcome {
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stalls := watchdog(wctx, client, b.stallTimeout, b.loopLimit)
	var a promptAnswer
	stall, got := "", false
	select {
	case a = <-answers:
		got = true
	case stall = <-stalls:
		log.Warn("the agent stalled: cancelling its turn", "evidence", stall)
	case <-ctx.Done():
		log.Info("stopping: cancelling the agent's turn", "grace", b.grace)
	}
	if !got {
		client.Cancel()
		if err := conn.Cancel(context.WithoutCancel(ctx), acp.CancelNotification{SessionId: sid}); err != nil {
			log.Warn("session/cancel failed", "err", err)
		}
		select {
		case a = <-answers:
		case <-time.After(b.grace):
			log.Warn("agent did not end its turn within the grace period; killing its process group")
			return outcome{stop: acp.StopReasonCancelled, stalled: stall, summary: client.Transcript().Summary()}
		}
	}
	sum := client.Transcript().Summary()
	switch {
	case stall != "":
		return outcome{stop: acp.StopReasonCancelled, stalled: stall, summary: sum}
	case a.err != nil && ctx.Err() != nil:
		return outcome{stop: acp.StopReasonCancelled, summary: sum}
	case a.err != nil:
		return crashed("session/prompt", a.err)
	}
	return outcome{stop: a.resp.StopReason, summary: sum}
}

// answered is a handshake failure the agent explained: no crash to report.
type answered struct{ err error }

func (a *answered) Error() string { return a.err.Error() }
func (a *answered) Unwrap() error { return a.err }

func authMethodIDs(ms []acp.AuthMethod) []string {
	var ids []string
	for _, m := range ms {
		switch {
		case m.Agent != nil:
			ids = append(ids, m.Agent.Id)
		case m.EnvVar != nil:
			ids = append(ids, m.EnvVar.Id)
		case m.Terminal != nil:
			ids = append(ids, m.Terminal.Id)
		}
	}
	return ids
}

// execBackend runs a plain command per story with the prompt on stdin;
// exit status 0 counts as end_turn.
type execBackend struct {
	command      string
	env          []string
	grace        time.Duration
	log          *slog.Logger
	onAgentStart func(int)
}

func (b *execBackend) runStory(ctx context.Context, storyID, prompt, dir string) outcome {
	log := b.log.With("story", storyID)
	out := &tailWriter{max: 8192}
	cmd := exec.Command("/bin/sh", "-c", b.command)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), b.env...), "AIMI_STORY_ID="+storyID)
	cmd.Stdin = strings.NewReader(prompt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	drain, err := attachDrained(cmd, io.MultiWriter(out, os.Stderr))
	if err != nil {
		return outcome{err: fmt.Errorf("agent output pipe: %w", err)}
	}
	if err := cmd.Start(); err != nil {
		drain.abandon()
		return outcome{err: fmt.Errorf("start %s: %w", contract.EnvAgentCommand, err)}
	}
	drain.started()
	if b.onAgentStart != nil {
		b.onAgentStart(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	select {
	case err = <-done:
	case <-ctx.Done():
		log.Info("stopping: terminating the exec agent", "grace", b.grace)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(b.grace):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		drain.wait(outputDrainWait)
		return outcome{stop: acp.StopReasonCancelled, summary: "Command output: " + tail(out.String(), 1500)}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !drain.wait(outputDrainWait) {
		log.Warn("the agent's last output did not go out within the drain wait; the rest is dropped", "wait", outputDrainWait)
	}
	sum := "Command output: " + tail(out.String(), 1500)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return outcome{stop: acp.StopReasonEndTurn, summary: sum}
	case errors.As(err, &ee):
		return outcome{err: fmt.Errorf("agent command exited with %v", ee.ProcessState), summary: sum}
	default:
		return outcome{err: fmt.Errorf("agent command: %w", err), summary: sum}
	}
}
