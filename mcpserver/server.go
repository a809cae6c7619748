package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/redact"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Bounds on what one answer holds: an agent's context is small, and a
// journal at its cap is a million records.
const (
	// maxOutput is the most bytes of text one tool result or resource
	// read carries; more is cut with a note saying how to ask for less.
	maxOutput = 128 << 10
	// maxTail is the most journal records swarm_logs reads at once.
	maxTail = 1000
	// defaultTail is what swarm_logs and a journal resource read when
	// no tail is given.
	defaultTail = 100
)

// Options say which repository and daemon the server serves.
type Options struct {
	// Repo is the repository, as cli.RepoRoot resolved it.
	Repo string
	// Socket is the daemon's socket ("" = the default, as the CLI's).
	Socket string
	// Secrets replaces what must never reach the agent (nil: only the
	// placeholders' shape is known; see configs.KnownSecrets).
	Secrets *redact.Redactor
	// Version is the server's version in the MCP handshake.
	Version string
	// Logger gets the server's own log (stderr: stdout is the protocol).
	Logger *slog.Logger
}

// Server is one `aimi mcp`: the MCP server and its daemon client.
type Server struct {
	opts   Options
	client *daemon.Client
	mcp    *mcp.Server
	res    *resources
}

// New builds the server with its tools and resources.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: o, client: daemon.NewClient(o.Socket)}
	s.res = newResources(s)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "aimi", Title: "aimi swarm", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       o.Logger,
		Capabilities: &mcp.ServerCapabilities{}, // no logging capability: the log goes to stderr
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			return s.res.checkURI(req.Params.URI)
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.mcp.AddReceivingMiddleware(s.cleanResults)
	s.addTools()
	s.res.add()
	return s
}

// instructions is what a client may show its model about the server.
const instructions = `aimi runs task files (.aimi/tasks/*-tasks.json) as a swarm of sandboxed coding agents, one container per task file, through the aimid daemon. Start with swarm_start, watch with swarm_status or by subscribing to aimi://swarm/state, answer the agents' permission requests with swarm_inbox and swarm_answer, read a container's journal with swarm_logs, and merge the finished branches with swarm_land. Every tool works on the repository this server was started in.`

// Run serves MCP on stdin and stdout until the client goes or ctx ends,
// following the daemon's events for the resources' notifications.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer s.client.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.res.follow(ctx)
	err := s.mcp.Run(ctx, t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// clean is the one way text leaves the server: secrets replaced (before
// the filter, which would split a value by its escapes), then the CLI's
// terminal-safety filter, then cut at maxOutput.
func (s *Server) clean(text string) string {
	if s.opts.Secrets != nil {
		text = s.opts.Secrets.String(text)
	}
	return bound(termsafe.String(text))
}

// bound cuts text at maxOutput bytes (at a rune's start) with a note.
func bound(text string) string {
	if len(text) <= maxOutput {
		return text
	}
	cut := maxOutput
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + cutNote
}

// cutNote ends an answer that was cut.
var cutNote = fmt.Sprintf("\n[answer cut at %d KiB: ask for less (tail, since, one name)]", maxOutput>>10)

// cleanResults passes every tool result and resource read, the SDK's own
// error results included (an argument that fails the schema), through
// clean.
func (s *Server) cleanResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		switch r := res.(type) {
		case *mcp.CallToolResult:
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text = s.clean(tc.Text)
				}
			}
		case *mcp.ReadResourceResult:
			for _, c := range r.Contents {
				c.Text = s.clean(c.Text)
			}
		}
		return res, err
	}
}

// errFull ends a write into a full buffer.
var errFull = errors.New("answer full")

// limitBuffer keeps the first maxOutput bytes written to it and then
// refuses more, which ends the stream that writes it; String then ends
// with cutNote.
type limitBuffer struct {
	buf  bytes.Buffer
	full bool
}

func (b *limitBuffer) Write(p []byte) (int, error) {
	room := maxOutput - b.buf.Len()
	if len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		b.full = true
		return max(room, 0), errFull
	}
	return b.buf.Write(p)
}

// settle is err, but none when the buffer filled: what wrote it stopped
// because the answer is complete as far as it goes (the error may wrap
// errFull with %v, as the CLI's write errors do).
func (b *limitBuffer) settle(err error) error {
	if b.full || errors.Is(err, errFull) {
		return nil
	}
	return err
}

func (b *limitBuffer) String() string {
	if b.full {
		return b.buf.String() + cutNote
	}
	return b.buf.String()
}

// answer is a tool's result: what it wrote, or its error as the CLI
// reports it (cli.DaemonError: the same message), as a tool error. A
// write cut by the buffer's bound is no error: the answer notes it.
func answer(out *limitBuffer, err error) (*mcp.CallToolResult, any, error) {
	if err = out.settle(err); err != nil {
		var ee *cli.ExitError
		if !errors.As(err, &ee) {
			err = cli.DaemonError(err)
		}
		// What the command printed before it failed comes first, as on a
		// terminal: the task files a start without a selection lists, the
		// note that no daemon runs, a held land's report (an error of no
		// message of its own).
		msg := out.String()
		if errors.As(err, &ee) && ee.Err != nil {
			msg += err.Error()
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.String()}}}, nil, nil
}
