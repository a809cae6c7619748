package acpclient

import (
	"context"
	"fmt"
	"io"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Conn is the client side of one ACP connection: the SDK's connection behind
// the gate, with the agent's answers checked against the schema.
type Conn struct {
	sdk    *acp.ClientSideConnection
	gate   *gate
	client *Client
}

// Connect speaks ACP with an agent whose stdin is agentStdin and whose stdout
// is agentStdout. The connection ends when agentStdout does.
func (c *Client) Connect(agentStdin io.Writer, agentStdout io.Reader) *Conn {
	g := newGate(c, agentStdout, c.log)
	// The SDK's constructor starts reading before it stores its own fields:
	// hold the agent's output back until it returned. No SetLogger for the
	// same reason; the SDK logs to slog.Default().
	ready := make(chan struct{})
	sdk := acp.NewClientSideConnection(c, tap{w: agentStdin, g: g}, readerFunc(func(p []byte) (int, error) {
		<-ready
		return g.Read(p)
	}))
	close(ready)
	return &Conn{sdk: sdk, gate: g, client: c}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Done is closed when the agent's output ended or broke framing.
func (c *Conn) Done() <-chan struct{} { return c.sdk.Done() }

// Err says why the connection ended when the agent broke the framing (a line
// over MaxLineBytes); nil otherwise. A call that failed because the peer
// disconnected should report this instead when it is set.
func (c *Conn) Err() error { return c.gate.streamErr() }

// Initialize runs initialize and refuses an agent that answers with a
// protocol version other than ours: ACP versions are not compatible with
// each other, and the client must disconnect when it does not speak the
// agent's choice.
func (c *Conn) Initialize(ctx context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	resp, err := c.sdk.Initialize(ctx, req)
	// A malformed answer may also fail the SDK's decoding: say what is
	// wrong with it rather than how decoding failed.
	if serr := c.gate.shapeErr(acp.AgentMethodInitialize); serr != nil {
		return resp, &ProtocolError{Method: acp.AgentMethodInitialize, Err: serr}
	}
	if err != nil {
		return resp, err
	}
	if v, _ := c.gate.protocolVersion(); v != int(req.ProtocolVersion) {
		return resp, &ProtocolError{Method: acp.AgentMethodInitialize, Err: fmt.Errorf(
			"the agent chose ACP protocol version %d and acp-runner speaks version %d only: use an agent release that supports version %d",
			v, req.ProtocolVersion, req.ProtocolVersion)}
	}
	return resp, nil
}

// Authenticate runs authenticate.
func (c *Conn) Authenticate(ctx context.Context, req acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return c.sdk.Authenticate(ctx, req)
}

// NewSession runs session/new; the session it returns is the only one whose
// updates and requests the Client accepts from then on.
func (c *Conn) NewSession(ctx context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	resp, err := c.sdk.NewSession(ctx, req)
	// A malformed answer may also fail the SDK's decoding: say what is
	// wrong with it rather than how decoding failed.
	if serr := c.gate.shapeErr(acp.AgentMethodSessionNew); serr != nil {
		return resp, &ProtocolError{Method: acp.AgentMethodSessionNew, Err: serr}
	}
	if err != nil {
		return resp, err
	}
	return resp, nil
}

// Prompt runs session/prompt.
func (c *Conn) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
	resp, err := c.sdk.Prompt(ctx, req)
	// A malformed answer may also fail the SDK's decoding: say what is
	// wrong with it rather than how decoding failed.
	if serr := c.gate.shapeErr(acp.AgentMethodSessionPrompt); serr != nil {
		return resp, &ProtocolError{Method: acp.AgentMethodSessionPrompt, Err: serr}
	}
	if err != nil {
		return resp, err
	}
	return resp, nil
}

// Cancel sends session/cancel.
func (c *Conn) Cancel(ctx context.Context, n acp.CancelNotification) error {
	return c.sdk.Cancel(ctx, n)
}

// ProtocolError is an answer of the agent that breaks the ACP schema.
type ProtocolError struct {
	Method string
	Err    error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("the agent's answer to %s breaks the ACP protocol: %v", e.Method, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// ours returns an invalid-params error unless id is the session this client
// runs; before session/new was answered no session is ours.
func (c *Client) ours(id acp.SessionId) error {
	cur := c.sessionID()
	if cur != "" && string(id) == cur {
		return nil
	}
	if cur == "" {
		return acp.NewInvalidParams(map[string]any{"sessionId": excerpt(string(id)), "error": "no session has been created yet"})
	}
	return acp.NewInvalidParams(map[string]any{"sessionId": excerpt(string(id)), "error": "unknown session; this client runs session " + cur})
}

func (c *Client) setSession(id acp.SessionId) { c.session.Store(strings.Clone(string(id))) }

func (c *Client) sessionID() string {
	s, _ := c.session.Load().(string)
	return s
}

// LoadSession runs session/load: the session becomes ours before the
// request goes, so the history the agent replays is accepted.
func (c *Conn) LoadSession(ctx context.Context, req acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	c.client.setSession(req.SessionId)
	return c.sdk.LoadSession(ctx, req)
}
