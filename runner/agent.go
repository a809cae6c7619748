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
	// session is the ACP session of the turn, loadable when the agent
	// offers session/load (a retry may go on in it).
	session  acp.SessionId
	loadable bool
	// limited says that a provider's limit ended the turn again after
	// the last of agent.limit_retries.
	limited string
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
	return b.turn(ctx, storyID, dir, "", func(bool) string { return prompt })
}

// resumeStory runs a story's turn again after one that ended in error:
// in the earlier session sid (session/load) when the agent offers
// loadSession, else in a new one. prompt says what to send, knowing
// whether the session was loaded.
func (b *acpBackend) resumeStory(ctx context.Context, storyID string, sid acp.SessionId, prompt func(loaded bool) string, dir string) outcome {
	return b.turn(ctx, storyID, dir, sid, prompt)
}

// turn starts the agent in dir, opens a session (loading load when it is
// set and the agent can) and runs one prompt.
func (b *acpBackend) turn(ctx context.Context, storyID, dir string, load acp.SessionId, prompt func(loaded bool) string) outcome {
	a, o, ok := b.start(storyID, dir)
	if !ok {
		return o
	}
	defer a.close()
	if o, failed := a.initialize(ctx); failed {
		return o
	}
	sid, loaded, o, failed := a.session(ctx, dir, load)
	if failed {
		return o
	}
	answers := make(chan promptAnswer, 1)
	go func() {
		// Not ctx: cancelling Prompt's context abandons the request and the
		// stop reason with it. A stop goes through session/cancel instead.
		r, err := a.conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{
			SessionId: sid,
			Prompt:    []acp.ContentBlock{acp.TextBlock(prompt(loaded))},
		})
		answers <- promptAnswer{r, err}
	}()
	o = b.awaitTurn(ctx, a.log, a.client, a.conn, sid, answers, a.crashed)
	o.session, o.loadable = sid, a.init.AgentCapabilities.LoadSession
	if c, ok := a.client.Cost(); ok {
		if ac := (usage.AgentCost{Amount: c.Amount, Currency: c.Currency}); ac.Valid() {
			o.cost = &ac
			a.log.Info("agent-reported cost", "amount", ac.Amount, "currency", ac.Currency)
		}
	}
	return o
}

// agentProc is one agent process speaking ACP on its stdio for one turn.
type agentProc struct {
	b      *acpBackend
	log    *slog.Logger
	client *acpclient.Client
	conn   *acpclient.Conn
	proc   *process
	inW    *os.File
	outR   *os.File
	init   acp.InitializeResponse
}

// start starts the agent process of a story in dir and connects to it.
func (b *acpBackend) start(storyID, dir string) (*agentProc, outcome, bool) {
	log := b.log.With("story", storyID)
	var asker acpclient.Asker
	if b.asker != nil {
		asker = b.asker(storyID)
	}
	client, err := acpclient.New(acpclient.Config{Workspace: dir, Policy: b.policy, Asker: asker, Env: b.env, Logger: log})
	if err != nil {
		return nil, outcome{err: err}, false
	}
	// Plain os.Pipe pairs: exec.Cmd then copies nothing, and Wait never
	// closes the ends the SDK is still reading.
	inR, inW, err := os.Pipe()
	if err != nil {
		client.Close()
		return nil, outcome{err: fmt.Errorf("agent stdin pipe: %w", err)}, false
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		client.Close()
		inR.Close()
		inW.Close()
		return nil, outcome{err: fmt.Errorf("agent stdout pipe: %w", err)}, false
	}
	proc, err := startProcess(b.argv, dir, b.env, inR, outW, log)
	inR.Close()
	outW.Close()
	if err != nil {
		client.Close()
		inW.Close()
		outR.Close()
		return nil, outcome{err: fmt.Errorf("start agent %q: %w (check %s)", b.argv[0], err, contract.EnvAgentCommand)}, false
	}
	log.Info("agent started", "pid", proc.cmd.Process.Pid, "command", b.argv[0])
	if b.onAgentStart != nil {
		b.onAgentStart(proc.cmd.Process.Pid)
	}
	a := &agentProc{b: b, log: log, client: client, proc: proc, inW: inW, outR: outR}
	a.conn = client.Connect(inW, outR)
	return a, outcome{}, true
}

// close ends the agent: EOF on its stdin (ACP agents exit on it), then
// its process group.
func (a *agentProc) close() {
	a.inW.Close()
	a.proc.stop()
	a.outR.Close()
	a.client.Close()
}

// crashed says why a step failed: the agent broke the framing or the
// protocol, or died (with the end of its stderr).
func (a *agentProc) crashed(step string, err error) outcome {
	if ferr := a.conn.Err(); ferr != nil {
		// The agent broke the framing; the SDK only saw a disconnect.
		return outcome{err: fmt.Errorf("agent %s: %w", step, ferr), summary: a.client.Transcript().Summary()}
	}
	var pe *acpclient.ProtocolError
	if errors.As(err, &pe) {
		return outcome{err: err, summary: a.client.Transcript().Summary()}
	}
	// The connection sees the agent's stdout close before Wait reaps the
	// process and drains its stderr: give the exit a moment to land so the
	// story says why the agent died.
	select {
	case <-a.proc.exited:
		err = fmt.Errorf("agent exited during %s (%v): %s", step, a.proc.cmd.ProcessState, lastWords(a.proc.stderr.String(), stderrExcerpt))
	case <-time.After(processExitWait):
		err = fmt.Errorf("agent %s: %w", step, err)
	}
	return outcome{err: err, summary: a.client.Transcript().Summary()}
}

// handshake bounds one step before the prompt: an agent that never
// answers must not hold the story until the swarm's timeout.
func (a *agentProc) handshake(ctx context.Context, step string, call func(context.Context) error) (o outcome, failed bool) {
	timeout := a.b.handshakeTimeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
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
			step, timeout, contract.EnvHandshakeTimeout, contract.EnvAgentCommand)}, true
	}
	return a.crashed(step, err), true
}

// initialize runs initialize, and authenticate when a method is set.
func (a *agentProc) initialize(ctx context.Context) (outcome, bool) {
	if o, failed := a.handshake(ctx, "initialize", func(ctx context.Context) (err error) {
		a.init, err = a.conn.Initialize(ctx, acp.InitializeRequest{
			ProtocolVersion: acp.ProtocolVersionNumber,
			ClientCapabilities: acp.ClientCapabilities{
				Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
				Terminal: true,
			},
			ClientInfo: &acp.Implementation{Name: "aimi-acp-runner", Version: "1"},
		})
		return err
	}); failed {
		return o, true
	}
	if a.b.authMethod == "" {
		return outcome{}, false
	}
	return a.handshake(ctx, "authenticate with "+a.b.authMethod, func(ctx context.Context) error {
		_, err := a.conn.Authenticate(ctx, acp.AuthenticateRequest{MethodId: a.b.authMethod})
		return err
	})
}

// session loads session load when it is set and the agent offers
// loadSession (a failed load falls back), else opens a new one.
func (a *agentProc) session(ctx context.Context, dir string, load acp.SessionId) (acp.SessionId, bool, outcome, bool) {
	if load != "" && a.init.AgentCapabilities.LoadSession {
		o, failed := a.handshake(ctx, "session/load", func(ctx context.Context) error {
			_, err := a.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: load, Cwd: dir, McpServers: []acp.McpServer{}})
			return err
		})
		if !failed {
			a.log.Info("agent session loaded", "session", load)
			return load, true, outcome{}, false
		}
		if ctx.Err() != nil || a.conn.Err() != nil {
			return "", false, o, true
		}
		a.log.Warn("session/load failed: opening a new session", "err", o.err)
	}
	var sess acp.NewSessionResponse
	o, failed := a.handshake(ctx, "session/new", func(ctx context.Context) (err error) {
		sess, err = a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
		var re *acp.RequestError
		if errors.As(err, &re) && re.Code == -32000 && a.b.authMethod == "" {
			return &answered{fmt.Errorf("the agent requires authentication: set %s to one of %v (and the credentials it needs)", contract.EnvAgentAuthMethod, authMethodIDs(a.init.AuthMethods))}
		}
		return err
	})
	return sess.SessionId, false, o, failed
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
