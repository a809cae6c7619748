package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/aimi-tools/swarm/tasks"
	acp "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"
)

// Exit codes of Run.
const (
	ExitOK     = 0 // completion completed or stopped
	ExitFailed = 1 // error message, or completion failed
)

// finalPushTimeout bounds the last push when the run is being stopped: the
// engine kills the container after its stop timeout anyway.
const finalPushTimeout = 5 * time.Second

// Run executes the one task-request read from stdin and writes protocol lines
// to stdout. Cancelling ctx is the stop signal (SIGTERM): the story in flight
// is cancelled the agent's way and the run ends with completion "stopped".
// It returns the process exit code.
func Run(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer) int {
	cfg.setDefaults()
	r := &run{cfg: cfg, log: cfg.Logger, out: acpmsg.NewWriter(stdout)}
	return r.main(ctx, stdin)
}

type run struct {
	cfg         Config
	log         *slog.Logger
	out         *acpmsg.Writer
	swarmID     string
	containerID string
	req         *acpmsg.TaskRequest
	git         *git
	env         []string // children's environment: base + envVars
	file        *tasks.File
	errs        []string       // completion errors
	fatal       bool           // a runner-level failure happened after work began
	gateway     *gatewayClient // nil: no model gateway to ask about limits
	ahead       *budgetAhead   // the first budget question, asked while the workspace fills
}

// emit writes one message; a refused message is a bug here, so it is logged
// loudly rather than silently dropped.
func (r *run) emit(t acpmsg.Type, p acpmsg.Payload) {
	if err := r.out.Write(acpmsg.NewMessage(t, r.swarmID, r.containerID, p)); err != nil {
		r.log.Error("cannot emit message", "type", t, "err", err)
	}
}

// fail emits the one error message of a run that could not begin.
func (r *run) fail(code, msg string) int {
	msg = acpmsg.TruncateOutput(msg)
	r.log.Error("runner failed before work began", "code", code, "message", msg)
	return r.finalWithFallbackIDs(acpmsg.TypeError, &acpmsg.ErrorPayload{Code: code, Message: msg}, ExitFailed)
}

// finalWithFallbackIDs emits the run's final message when the request's ids
// may be missing or invalid: the request's ids, then the daemon's
// environment (AIMI_SWARM_ID, AIMI_CONTAINER_ID), then ids that at least keep
// the line valid (a fresh swarm id, the hostname Docker sets to the short
// container id).
func (r *run) finalWithFallbackIDs(t acpmsg.Type, p acpmsg.Payload, code int) int {
	host, _ := os.Hostname()
	for _, ids := range [][2]string{{r.swarmID, r.containerID}, {r.cfg.SwarmID, r.cfg.ContainerID}, {uuid.NewString(), firstNonEmpty(r.cfg.ContainerID, host, "unknown")}} {
		if err := r.out.Write(acpmsg.NewMessage(t, ids[0], ids[1], p)); err == nil {
			return code
		}
	}
	r.log.Error("could not emit the final message", "type", t)
	return code
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (r *run) addErr(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	r.log.Warn("run error", "error", s)
	r.errs = append(r.errs, s)
}

func (r *run) complete(status string) int {
	r.emit(acpmsg.TypeCompletion, &acpmsg.Completion{Status: status, PRURL: nil, Errors: acpmsg.CapErrors(r.errs)})
	if status == acpmsg.CompletionFailed {
		return ExitFailed
	}
	return ExitOK
}

// intake is what the daemon's first line said.
type intake struct {
	msg  acpmsg.Message
	req  *acpmsg.TaskRequest
	perr *prepError
}

// awaitRequest reads the task-request; ok false: stopped first. The read
// blocks until the daemon writes the request; a stop must not wait for
// it. (The reading goroutine is left behind on a stop: the process exits
// right after.)
func awaitRequest(ctx context.Context, stdin io.Reader) (in intake, ok bool) {
	got := make(chan intake, 1)
	go func() {
		msg, req, perr := readRequest(stdin)
		got <- intake{msg, req, perr}
	}()
	select {
	case in = <-got:
		return in, true
	case <-ctx.Done():
		return intake{}, false
	}
}

func (r *run) main(ctx context.Context, stdin io.Reader) int {
	in, ok := awaitRequest(ctx, stdin)
	if !ok {
		r.log.Info("stopped before a task-request arrived")
		return r.finalWithFallbackIDs(acpmsg.TypeCompletion, &acpmsg.Completion{Status: acpmsg.CompletionStopped, Errors: []string{}}, ExitOK)
	}
	msg, req, perr := in.msg, in.req, in.perr
	r.swarmID, r.containerID = msg.SwarmID, msg.ContainerID
	if perr != nil {
		return r.fail(perr.code, perr.msg)
	}
	r.req = req
	r.log = r.log.With("swarm", r.swarmID, "container", r.containerID, "branch", req.BranchName)
	r.env = childEnv(r.cfg.Env, req.EnvVars)
	if g, err := newGatewayClient(r.env, r.cfg.Dial); err != nil {
		r.log.Warn("the model gateway cannot be asked about limits: a story a limit ends fails as any other", "err", err)
	} else {
		r.gateway = g
	}
	r.git = newGit(&r.cfg)
	if err := r.git.connect(&r.cfg, req.RepoURL); err != nil {
		return r.fail(acpmsg.CodeGitCloneFailed, err.Error())
	}
	defer r.git.close()
	r.log.Info("task-request accepted", "taskFile", req.TaskFilePath, "repo", redactURL(req.RepoURL), "agent", r.cfg.Agent)
	actx, cancelAhead := context.WithCancel(ctx)
	defer cancelAhead()
	r.ahead = r.askBudgetAhead(actx)

	if err := r.prepare(ctx); err != nil {
		var pe *prepError
		if errors.As(err, &pe) {
			if ctx.Err() != nil {
				return r.complete(acpmsg.CompletionStopped)
			}
			return r.fail(pe.code, pe.msg)
		}
		return r.fail(acpmsg.CodeUnknownError, err.Error())
	}
	be, err := r.backend()
	if err != nil {
		return r.fail(acpmsg.CodeAgentCrash, err.Error())
	}
	stopped := r.schedule(ctx, be)

	// A run is completed only once the repository holds its branch: the
	// last push retries while the repository is away (a daemon restart),
	// and if it still fails the run fails, naming what was not received.
	pushCtx, budget := ctx, r.cfg.PushRetry
	if stopped {
		var cancel context.CancelFunc
		pushCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finalPushTimeout)
		defer cancel()
		budget = finalPushTimeout
	}
	pushed := true
	if err := r.git.push(pushCtx, req.BranchName, budget); err != nil {
		pushed = false
		r.addErr("%s", r.unreceivedReport(pushCtx, err))
	}
	switch {
	case stopped:
		return r.complete(acpmsg.CompletionStopped)
	case r.fatal || !pushed:
		return r.complete(acpmsg.CompletionFailed)
	}
	return r.complete(acpmsg.CompletionCompleted)
}

// FetchHint says how to get commits a container could not push; the
// runner puts it into the completion's errors.
const FetchHint = "they stay in this container (cleanup keeps it): run 'aimi swarm fetch' in the repository to copy its branch into your checkout"

// unreceivedReport is the completion error of a last push that failed: the
// failure, the commits the repository lacks and how to get them.
func (r *run) unreceivedReport(ctx context.Context, pushErr error) string {
	const show = 10
	commits, total, err := r.git.unreceived(context.WithoutCancel(ctx), show)
	var what string
	switch {
	case err != nil:
		what = fmt.Sprintf("could not list the commits it lacks (%v)", err)
	case total == 0:
		return fmt.Sprintf("last push of %s failed, but the repository already holds every commit: %v", r.req.BranchName, pushErr)
	default:
		short := make([]string, len(commits))
		for i, c := range commits {
			short[i] = c[:min(len(c), 12)]
		}
		more := ""
		if total > len(commits) {
			more = fmt.Sprintf(" and %d more", total-len(commits))
		}
		what = fmt.Sprintf("%d commit(s) of %s were not received (%s%s)", total, r.req.BranchName, strings.Join(short, " "), more)
	}
	return fmt.Sprintf("%s: %s; last push failed: %v", acpmsg.CodeGitPushFailed, what+"; "+FetchHint, pushErr)
}

// readRequest reads and validates the one task-request line. Errors carry
// the code of the error message: TASK_FILE_INVALID when the task file path is
// what is wrong, INVALID_INPUT otherwise.
func readRequest(stdin io.Reader) (acpmsg.Message, *acpmsg.TaskRequest, *prepError) {
	line, err := acpmsg.NewLineReader(stdin, acpmsg.MaxLineBytes).Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return acpmsg.Message{}, nil, &prepError{acpmsg.CodeInvalidInput, "no task-request on stdin: input ended before the first line"}
		}
		return acpmsg.Message{}, nil, &prepError{acpmsg.CodeInvalidInput, "read task-request: " + err.Error()}
	}
	msg, req, err := acpmsg.ParseTaskRequest(line)
	if err != nil {
		code := acpmsg.CodeInvalidInput
		for _, fe := range acpmsg.FieldErrors(err) {
			if fe.Field == "payload.taskFilePath" {
				code = acpmsg.CodeTaskFileInvalid
			}
		}
		return msg, nil, &prepError{code, "task-request: " + err.Error()}
	}
	return msg, req, nil
}

// childEnv is the environment of agents, verify commands and terminals: the
// runner's own (without the git token) plus the request's envVars.
func childEnv(base []string, vars map[string]string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		if !strings.HasPrefix(kv, contract.EnvGitToken+"=") {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		if k != contract.EnvGitToken {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k]) // later entries win in exec.Cmd
	}
	return env
}

// redactURL drops credentials from a repository URL for logs and messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = url.User("redacted")
	return u.String()
}

type prepError struct{ code, msg string }

func (e *prepError) Error() string { return e.code + ": " + e.msg }

// prepare clones, checks out and loads the task file.
func (r *run) prepare(ctx context.Context) error {
	ws := r.cfg.Workspace
	// Only a clone needs the directory empty: on a workspace image's tree
	// the listing is a read through the storage driver for nothing.
	if r.cfg.WorkspaceBase == "" {
		if ents, err := os.ReadDir(ws); err == nil && len(ents) > 0 {
			return &prepError{acpmsg.CodeGitCloneFailed, fmt.Sprintf("workspace %s is not empty; the runner clones into an empty directory (set %s)", ws, contract.EnvWorkspace)}
		}
	}
	start := time.Now()
	onBranch, how, err := r.fillWorkspace(ctx)
	if err != nil {
		return &prepError{acpmsg.CodeGitCloneFailed, fmt.Sprintf("clone %s: %v", redactURL(r.req.RepoURL), err)}
	}
	cloneTook := time.Since(start)
	if err := r.git.checkout(ctx, r.req.BranchName, onBranch); err != nil {
		return &prepError{acpmsg.CodeGitCheckoutFailed, fmt.Sprintf("check out %s: %v", r.req.BranchName, err)}
	}
	// The clone is most of a sandbox's way from its claim to its first
	// story: its share is worth a line.
	r.log.Info("workspace ready", "from", how, "onBranch", onBranch, "clone", cloneTook.Round(time.Millisecond),
		"checkout", (time.Since(start) - cloneTook).Round(time.Millisecond))
	// The branch is the agent's and the repository's: the task file may be
	// a link, a FIFO or a blob of any size. Read it as the daemon does.
	data, err := tasks.ReadFileIn(ws, r.req.TaskFilePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &prepError{acpmsg.CodeTaskFileNotFound, fmt.Sprintf("task file %s does not exist on branch %s of %s", r.req.TaskFilePath, r.req.BranchName, redactURL(r.req.RepoURL))}
	case err != nil:
		return &prepError{acpmsg.CodeTaskFileInvalid, err.Error()}
	}
	f, err := parseTaskFile(data)
	if err != nil {
		return &prepError{acpmsg.CodeTaskFileInvalid, fmt.Sprintf("%s: %v", r.req.TaskFilePath, err)}
	}
	if f.Metadata.BranchName != r.req.BranchName {
		r.log.Warn("the task file names another branch than the task-request; working on the request's",
			"taskFileBranch", f.Metadata.BranchName, "requestBranch", r.req.BranchName)
	}
	r.file = f
	return nil
}

func (r *run) backend() (backend, error) {
	switch r.cfg.Agent {
	case AgentExec:
		return &execBackend{command: r.cfg.AgentCommand, env: r.env, grace: r.cfg.StopGrace, log: r.log, onAgentStart: r.cfg.onAgentStart}, nil
	case AgentACP, AgentDemo:
		argv := r.cfg.DemoCommand
		if r.cfg.Agent == AgentACP {
			// Through the shell so the command line may carry arguments
			// and quoting; exec keeps the agent the group leader.
			argv = []string{"/bin/sh", "-c", "exec " + r.cfg.AgentCommand}
		}
		if len(argv) == 0 {
			return nil, errors.New("no command to start the demo agent (os.Executable failed)")
		}
		b := &acpBackend{argv: argv, env: r.env, policy: r.cfg.Policy, authMethod: r.cfg.AuthMethod,
			grace: r.cfg.StopGrace, handshakeTimeout: r.cfg.HandshakeTimeout,
			stallTimeout: r.cfg.StallTimeout, loopLimit: r.cfg.LoopLimit, log: r.log, onAgentStart: r.cfg.onAgentStart}
		if r.cfg.Policy.AsksAnyone() {
			ch, err := openAskChannel(r.cfg.AskURL, r.req.RepoURL, r.cfg.GitToken, r.cfg.CAFile, r.cfg.DaemonGit, r.cfg.Dial, r.log)
			if err != nil {
				// Asked calls are rejected then; the rest of the policy holds.
				r.log.Warn("permission policy asks a person, but nobody can be asked: asked tool calls are rejected", "err", err)
			} else {
				b.asker = ch.forStory
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown agent backend %q", r.cfg.Agent)
}

// verify runs the configured verify command; ok is true without one.
func (r *run) verify(ctx context.Context, dir string) (ok bool, detail string) {
	if r.cfg.VerifyCommand == "" {
		return true, ""
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", r.cfg.VerifyCommand)
	cmd.Dir = dir
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = processExitWait
	out := &tailWriter{max: 8192}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if err == nil {
		return true, "Verify command passed."
	}
	return false, fmt.Sprintf("Verify command failed (%v). Output tail: %s", err, tail(out.String(), 900))
}

// writeTaskFile writes the in-memory task file into the workspace.
func (r *run) writeTaskFile() error {
	data, err := marshalTaskFile(r.file)
	if err != nil {
		return err
	}
	path := filepath.Join(r.cfg.Workspace, filepath.FromSlash(r.req.TaskFilePath))
	return atomicfile.WriteFile(path, data, 0o644)
}

// stopReasonText explains a non-end_turn stop reason in a story's output.
func stopReasonText(s acp.StopReason) string {
	switch s {
	case acp.StopReasonRefusal:
		return "the agent refused to continue (stop reason refusal)"
	case acp.StopReasonMaxTokens:
		return "the agent hit its token limit (stop reason max_tokens)"
	case acp.StopReasonMaxTurnRequests:
		return "the agent hit its limit of model requests for the turn (stop reason max_turn_requests)"
	case acp.StopReasonCancelled:
		return "the agent cancelled the turn by itself (stop reason cancelled)"
	}
	return fmt.Sprintf("the agent ended with unknown stop reason %q", s)
}
