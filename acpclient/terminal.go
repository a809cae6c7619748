package acpclient

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"
)

// DefaultOutputByteLimit bounds a terminal's retained output when the agent
// gives no outputByteLimit, so a runaway command cannot exhaust memory.
const DefaultOutputByteLimit = 1 << 20

// MaxOutputByteLimit bounds a terminal's retained output whatever limit the
// agent asks for: the runner holds it in memory.
const MaxOutputByteLimit = 8 << 20

// killGrace is how long a killed terminal's process group gets between
// SIGTERM and SIGKILL.
const killGrace = 2 * time.Second

type terminal struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the command has exited
	exit acp.TerminalExitStatus
}

// maxTerminals bounds the terminals an agent holds at once (each keeps up
// to MaxOutputByteLimit of output); it releases one to create another.
const maxTerminals = 64

type terminals struct {
	mu       sync.Mutex
	m        map[string]*terminal
	starting int // reserved by CreateTerminal, not yet in m
}

// reserve takes a place for a new terminal, or reports that all are taken.
func (ts *terminals) reserve() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.m)+ts.starting >= maxTerminals {
		return false
	}
	ts.starting++
	return true
}

// settle gives back a reservation, adding t under id when t is not nil.
func (ts *terminals) settle(id string, t *terminal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.starting--
	if t != nil {
		ts.m[id] = t
	}
}

func newTerminals() *terminals { return &terminals{m: map[string]*terminal{}} }

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		return nil, acp.NewInvalidParams(map[string]any{"terminalId": id, "error": "unknown or released terminal"})
	}
	return t, nil
}

func (ts *terminals) closeAll() {
	ts.mu.Lock()
	all := ts.m
	ts.m = map[string]*terminal{}
	ts.mu.Unlock()
	for _, t := range all {
		t.kill()
	}
}

// kill stops the command's whole process group: a shell's children would
// otherwise outlive it and keep running in the workspace.
func (t *terminal) kill() {
	select {
	case <-t.done:
		return
	default:
	}
	pgid := t.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-t.done:
	case <-time.After(killGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-t.done
	}
}

// CreateTerminal implements acp.Client: the command starts in the workspace
// (or a cwd inside it) in its own process group.
func (c *Client) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	dir := c.resolved
	if p.Cwd != nil && *p.Cwd != "" {
		r, err := c.rel(*p.Cwd)
		if err != nil {
			return acp.CreateTerminalResponse{}, outside(*p.Cwd, err)
		}
		// os.Root refuses a symlinked cwd that leaves the workspace.
		st, err := c.root.Stat(r)
		if err != nil {
			return acp.CreateTerminalResponse{}, fsError(*p.Cwd, err)
		}
		if !st.IsDir() {
			return acp.CreateTerminalResponse{}, acp.NewInvalidParams(map[string]any{"cwd": *p.Cwd, "error": "not a directory"})
		}
		real, err := filepath.EvalSymlinks(filepath.Join(c.resolved, r))
		if err != nil {
			return acp.CreateTerminalResponse{}, fsError(*p.Cwd, err)
		}
		dir = real
	}
	if p.Command == "" {
		return acp.CreateTerminalResponse{}, acp.NewInvalidParams(map[string]any{"error": "empty command"})
	}
	limit := DefaultOutputByteLimit
	if p.OutputByteLimit != nil && *p.OutputByteLimit >= 0 {
		limit = min(*p.OutputByteLimit, MaxOutputByteLimit)
	}
	if !c.terms.reserve() {
		return acp.CreateTerminalResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("%d terminals are open; release one (terminal/release) before creating another", maxTerminals)})
	}
	var started *terminal
	id := "term_" + uuid.NewString()
	defer func() { c.terms.settle(id, started) }()
	cmd := exec.Command(p.Command, p.Args...)
	cmd.Dir = dir
	cmd.Env = append([]string(nil), c.env...)
	for _, e := range p.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out := newTailBuffer(limit)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return acp.CreateTerminalResponse{}, acp.NewInternalError(map[string]any{"command": p.Command, "error": err.Error()})
	}
	t := &terminal{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		t.exit = exitStatus(cmd, err)
		close(t.done)
	}()
	started = t
	c.transcript.noteFile("ran", p.Command)
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

func exitStatus(cmd *exec.Cmd, _ error) acp.TerminalExitStatus {
	var st acp.TerminalExitStatus
	ps := cmd.ProcessState
	if ps == nil {
		code := -1
		st.ExitCode = &code
		return st
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal().String()
		st.Signal = &sig
		return st
	}
	code := ps.ExitCode()
	st.ExitCode = &code
	return st
}

// TerminalOutput implements acp.Client.
func (c *Client) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	t, err := c.terms.get(p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	out, truncated := t.out.snapshot()
	resp := acp.TerminalOutputResponse{Output: out, Truncated: truncated}
	select {
	case <-t.done:
		st := t.exit
		resp.ExitStatus = &st
	default:
	}
	return resp, nil
}

// WaitForTerminalExit implements acp.Client.
func (c *Client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	t, err := c.terms.get(p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
		return acp.WaitForTerminalExitResponse{ExitCode: t.exit.ExitCode, Signal: t.exit.Signal}, nil
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, fmt.Errorf("wait for terminal %s: %w", p.TerminalId, ctx.Err())
	}
}

// KillTerminal implements acp.Client: the command stops, the terminal stays
// readable until released.
func (c *Client) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.KillTerminalResponse{}, err
	}
	t, err := c.terms.get(p.TerminalId)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	t.kill()
	return acp.KillTerminalResponse{}, nil
}

// ReleaseTerminal implements acp.Client: kills the command if it still runs
// and forgets the terminal.
func (c *Client) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	t, err := c.terms.get(p.TerminalId)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	c.terms.mu.Lock()
	delete(c.terms.m, p.TerminalId)
	c.terms.mu.Unlock()
	t.kill()
	return acp.ReleaseTerminalResponse{}, nil
}

// tailBuffer keeps the last limit bytes written to it. When it has to drop
// bytes, it drops them from the front and never starts inside a UTF-8
// sequence, as ACP requires for outputByteLimit.
type tailBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	// Compact only past twice the limit, so a command writing many small
	// chunks costs amortized O(1) per byte instead of a copy per write.
	if len(b.buf) > 2*b.limit+4 {
		b.buf = cutFront(b.buf, b.limit)
		b.truncated = true
	}
	return len(p), nil
}

func (b *tailBuffer) snapshot() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > b.limit {
		return string(cutFront(b.buf, b.limit)), true
	}
	return string(b.buf), b.truncated
}

// cutFront returns at most limit bytes from the end of buf, starting on a
// UTF-8 boundary (so the result may be a few bytes shorter than limit).
func cutFront(buf []byte, limit int) []byte {
	if len(buf) <= limit {
		return buf
	}
	start := len(buf) - limit
	for start < len(buf) && !utf8.RuneStart(buf[start]) {
		start++
	}
	// Copy so the dropped prefix can be collected.
	return append([]byte(nil), buf[start:]...)
}

// running counts the terminals whose command has not exited.
func (ts *terminals) running() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, t := range ts.m {
		select {
		case <-t.done:
		default:
			n++
		}
	}
	return n + ts.starting
}
