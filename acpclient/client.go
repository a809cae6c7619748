package acpclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	acp "github.com/coder/acp-go-sdk"

	"github.com/aimi-tools/swarm/internal/safefile"
)

// Config configures one Client.
type Config struct {
	// Workspace is the directory agents may touch: fs/* paths and terminal
	// working directories must resolve inside it.
	Workspace string
	// Policy answers permission requests.
	Policy Policy
	// Asker answers the requests Policy asks a person about; without one
	// they are rejected.
	Asker Asker
	// Env is the environment of terminal commands (the runner's environment
	// plus the task-request's envVars); nil means os.Environ().
	Env []string
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Client implements acp.Client for one agent connection. It is safe for
// concurrent use: the SDK calls requests from several goroutines.
type Client struct {
	workspace string   // absolute, as configured
	resolved  string   // workspace with symlinks resolved
	root      *os.Root // every fs/* access goes through it
	policy    Policy
	asker     Asker
	asking    atomic.Int32 // requests waiting for a person: the agent is silent for a reason
	env       []string
	log       *slog.Logger

	cancelled atomic.Bool  // after Cancel, permission requests get the cancelled outcome
	session   atomic.Value // string: the session session/new created; requests and updates must name it

	transcript *Transcript
	terms      *terminals
	watch      *watch
}

var _ acp.Client = (*Client)(nil)

// New opens the workspace and returns a Client. Close it to kill terminals
// that are still running.
func New(cfg Config) (*Client, error) {
	abs, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("acp client: workspace %q: %w", cfg.Workspace, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("acp client: resolve workspace %q: %w (it must exist)", abs, err)
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("acp client: open workspace %q: %w", resolved, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	return &Client{
		workspace:  abs,
		resolved:   resolved,
		root:       root,
		policy:     cfg.Policy,
		asker:      cfg.Asker,
		env:        env,
		log:        log,
		transcript: newTranscript(),
		terms:      newTerminals(),
		watch:      newWatch(),
	}, nil
}

// Close kills and forgets every terminal and closes the workspace root.
func (c *Client) Close() error {
	c.terms.closeAll()
	return c.root.Close()
}

// Cancel makes every permission request from now on answer with the
// cancelled outcome, as ACP requires once the client sent session/cancel.
func (c *Client) Cancel() { c.cancelled.Store(true) }

// Transcript is what the agent reported so far.
func (c *Client) Transcript() *Transcript { return c.transcript }

// rel maps an agent-supplied path to a path relative to the workspace root.
// ACP paths are absolute; a relative one is taken relative to the workspace.
// Only the lexical part is checked here: os.Root refuses symlink escapes when
// the path is opened.
func (c *Client) rel(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.workspace, p)
	}
	p = filepath.Clean(p)
	for _, base := range []string{c.workspace, c.resolved} {
		r, err := filepath.Rel(base, p)
		if err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return r, nil
		}
	}
	return "", fmt.Errorf("path %q is outside the workspace %s", p, c.workspace)
}

func outside(path string, err error) *acp.RequestError {
	return acp.NewInvalidParams(map[string]any{"path": path, "error": err.Error()})
}

// isEscape reports whether os.Root refused the path because it leaves the
// root (".." or a symlink pointing out). The os package keeps that error
// unexported (errPathEscapes), so its text is the only handle.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func fsError(path string, err error) error {
	if isEscape(err) {
		return outside(path, fmt.Errorf("path %q resolves outside the workspace", path))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return acp.NewInvalidParams(map[string]any{"path": path, "error": "file does not exist"})
	}
	return acp.NewInternalError(map[string]any{"path": path, "error": err.Error()})
}

// MaxReadTextFileBytes bounds a file fs/read_text_file returns: the answer
// is one line to the agent, and the runner holds the file in memory.
const MaxReadTextFileBytes = 8 << 20

// ReadTextFile implements acp.Client. Line is 1-based; Limit counts lines.
func (c *Client) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	r, err := c.rel(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, outside(p.Path, err)
	}
	// The agent can put anything in its workspace: read a regular file
	// only, bounded, and never wait on a FIFO.
	data, err := safefile.ReadIn(c.resolved, filepath.ToSlash(r), MaxReadTextFileBytes)
	switch {
	case errors.Is(err, safefile.ErrNotRegular), errors.Is(err, safefile.ErrTooLarge):
		return acp.ReadTextFileResponse{}, acp.NewInvalidParams(map[string]any{"path": p.Path,
			"error": fmt.Sprintf("%v; fs/read_text_file reads regular files of at most %d bytes: read parts of larger files with a terminal command", err, MaxReadTextFileBytes)})
	case err != nil:
		return acp.ReadTextFileResponse{}, fsError(p.Path, err)
	}
	c.transcript.noteFile("read", r)
	return acp.ReadTextFileResponse{Content: sliceLines(string(data), p.Line, p.Limit)}, nil
}

// sliceLines returns limit lines starting at the 1-based line.
func sliceLines(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	start := 0
	if line != nil && *line > 1 {
		start = *line - 1
	}
	if start >= len(lines) {
		return ""
	}
	end := len(lines)
	if limit != nil && *limit >= 0 && start+*limit < end {
		end = start + *limit
	}
	return strings.Join(lines[start:end], "")
}

// WriteTextFile implements acp.Client. Missing parent directories are made.
func (c *Client) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	r, err := c.rel(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, outside(p.Path, err)
	}
	if r == "." {
		return acp.WriteTextFileResponse{}, outside(p.Path, errors.New("the workspace itself is not a file"))
	}
	if dir := filepath.Dir(r); dir != "." {
		if err := c.root.MkdirAll(dir, 0o755); err != nil {
			return acp.WriteTextFileResponse{}, fsError(p.Path, err)
		}
	}
	if err := c.writeRegular(r, p.Content); err != nil {
		if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, syscall.ENXIO) {
			return acp.WriteTextFileResponse{}, acp.NewInvalidParams(map[string]any{"path": p.Path,
				"error": fmt.Sprintf("%v; fs/write_text_file writes regular files only", err)})
		}
		return acp.WriteTextFileResponse{}, fsError(p.Path, err)
	}
	c.transcript.noteFile("wrote", r)
	return acp.WriteTextFileResponse{}, nil
}

// writeRegular replaces the content of the regular file rel (creating it).
// The open does not block: a FIFO without a reader is ENXIO, and anything
// opened that is not a regular file is refused before it is written.
func (c *Client) writeRegular(rel, content string) error {
	f, err := c.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%w (mode %s)", safefile.ErrNotRegular, fi.Mode().Type())
	default:
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteString(content)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RequestPermission implements acp.Client: the answer comes from the policy,
// or is cancelled once the turn is being cancelled.
func (c *Client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	if err := c.ours(p.SessionId); err != nil {
		return acp.RequestPermissionResponse{}, err
	}
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	if c.cancelled.Load() || ctx.Err() != nil {
		c.transcript.notePermission(title, "cancelled")
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	if c.policy.Asks(p.ToolCall.Kind) {
		id, verdict, ok := c.ask(ctx, p)
		if !ok {
			verdict = "rejected (" + verdict + ")"
			id, ok = choose(p.Options, false)
		}
		if c.cancelled.Load() || ctx.Err() != nil || !ok {
			c.transcript.notePermission(title, "cancelled")
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
		}
		c.transcript.notePermission(title, verdict)
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
	}
	allow := c.policy.allows(p.ToolCall.Kind)
	id, ok := choose(p.Options, allow)
	if !ok {
		c.transcript.notePermission(title, "cancelled (no matching option)")
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	verdict := "rejected"
	if allow {
		verdict = "allowed"
	}
	c.transcript.notePermission(title, verdict)
	c.log.Debug("permission answered", "tool", title, "verdict", verdict, "policy", c.policy.String())
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
}

// SessionUpdate implements acp.Client. A Conn applies updates in its gate
// and never lets the SDK call this; it is here for the interface and for
// callers driving the Client without a Conn.
func (c *Client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	if err := c.ours(n.SessionId); err != nil {
		return err
	}
	c.transcript.apply(n.Update)
	return nil
}
