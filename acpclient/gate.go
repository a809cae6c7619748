package acpclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/aimi-tools/swarm/internal/termsafe"
)

// MaxLineBytes bounds one line the agent writes to stdout. ACP frames every
// message as one JSON line; the SDK gives up past 10 MiB with nothing but a
// disconnect, so the gate refuses earlier and says why.
const MaxLineBytes = 8 << 20

// ErrLineTooLong is why a connection ends when the agent wrote a line over
// MaxLineBytes.
var ErrLineTooLong = errors.New("line too long")

// maxIgnoredLogs bounds the warnings about ignored messages per connection: a
// hostile agent must not flood the runner's log.
const maxIgnoredLogs = 10

// envelope is the part of a JSON-RPC message the gate routes by.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (e *envelope) hasID() bool { return len(e.ID) > 0 && !bytes.Equal(e.ID, []byte("null")) }

// gate stands between the agent's stdout and the SDK. The SDK queues
// notifications in a fixed buffer of 1024 and drops the whole connection
// when a burst overflows it; the gate applies session/update notifications
// itself, in stream order, on the SDK's reading goroutine, so a burst only
// slows the agent's writes down (the pipe fills) and never reaches that
// queue. On the way it enforces what the protocol requires of the agent:
// answers to initialize, session/new and session/prompt carry their required
// fields, updates and requests name our session, and lines stay bounded.
type gate struct {
	client *Client
	log    *slog.Logger
	src    *bufio.Reader
	out    []byte // the rest of the line being handed to the SDK

	mu      sync.Mutex
	sent    map[string]string // request id -> method, of requests to the agent
	shape   map[string]error  // method -> what its answer lacked
	version *int              // protocolVersion of the initialize answer
	err     error             // why the stream ended, when the agent broke framing
	ignored int
}

func newGate(c *Client, agentStdout io.Reader, log *slog.Logger) *gate {
	return &gate{
		client: c,
		log:    log,
		src:    bufio.NewReaderSize(agentStdout, 64<<10),
		sent:   map[string]string{},
		shape:  map[string]error{},
	}
}

// Read implements io.Reader for the SDK: it hands over whole lines the SDK
// should see and consumes the rest.
func (g *gate) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		line, err := g.readLine()
		if err != nil {
			if errors.Is(err, ErrLineTooLong) {
				g.mu.Lock()
				g.err = err
				g.mu.Unlock()
				g.log.Error("agent broke ACP framing; closing the connection", "err", err)
			}
			return 0, err
		}
		g.client.watch.touch("")
		if g.pass(line) {
			g.out = append(line, '\n')
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// readLine returns the next line without its newline. The returned slice is
// the gate's own.
func (g *gate) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := g.src.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLineBytes+1 {
			return nil, fmt.Errorf("the agent wrote a line of more than %d bytes to stdout (ACP messages are one JSON object per line, so the stream cannot go on): %w", MaxLineBytes, ErrLineTooLong)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// pass routes one line: true means the SDK gets it.
func (g *gate) pass(line []byte) bool {
	if len(bytes.TrimSpace(line)) == 0 {
		return false
	}
	var e envelope
	if err := json.Unmarshal(line, &e); err != nil {
		g.ignore("a line that is not JSON-RPC", "err", err.Error(), "line", excerpt(string(line)))
		return false
	}
	switch {
	case e.Method == "" && e.hasID():
		g.answer(&e)
		return true
	case e.Method != "" && e.hasID():
		// A request to us: the SDK dispatches it and the Client checks the
		// session it names.
		g.client.watch.touch(excerpt(e.Method))
		return true
	case e.Method == acp.ClientMethodSessionUpdate:
		g.update(e.Params)
		return false
	case e.Method == "$/cancel_request":
		return true
	case e.Method != "":
		g.ignore("a notification acp-runner does not handle", "method", excerpt(e.Method))
		return false
	default:
		g.ignore("a message with neither id nor method", "line", excerpt(string(line)))
		return false
	}
}

func (g *gate) update(params json.RawMessage) {
	var n acp.SessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		g.ignore("a session/update that does not parse", "err", err.Error())
		return
	}
	if err := g.client.ours(n.SessionId); err != nil {
		g.ignore("a session/update for no session of ours", "session", excerpt(string(n.SessionId)), "ours", excerpt(g.client.sessionID()))
		return
	}
	g.client.transcript.apply(n.Update)
	g.client.watch.update(n.Update)
}

// answer checks an answer to one of our requests for the fields the schema
// requires; the session id of session/new becomes ours here, before the SDK
// reads any later line, so no update of the new session is missed.
func (g *gate) answer(e *envelope) {
	key := string(bytes.TrimSpace(e.ID))
	g.mu.Lock()
	method, ok := g.sent[key]
	delete(g.sent, key)
	g.mu.Unlock()
	if !ok || len(e.Error) > 0 && !bytes.Equal(e.Error, []byte("null")) {
		return
	}
	var err error
	switch method {
	case acp.AgentMethodInitialize:
		var r struct {
			ProtocolVersion json.RawMessage `json:"protocolVersion"`
		}
		err = decodeResult(e.Result, &r)
		if err == nil {
			err = g.noteVersion(r.ProtocolVersion)
		}
	case acp.AgentMethodSessionNew:
		var r struct {
			SessionID *string `json:"sessionId"`
		}
		err = decodeResult(e.Result, &r)
		switch {
		case err != nil:
		case r.SessionID == nil:
			err = errors.New("it has no sessionId, which the schema requires")
		case strings.TrimSpace(*r.SessionID) == "":
			err = errors.New("its sessionId is empty")
		default:
			g.client.setSession(acp.SessionId(*r.SessionID))
		}
	case acp.AgentMethodSessionPrompt:
		var r struct {
			StopReason *acp.StopReason `json:"stopReason"`
		}
		err = decodeResult(e.Result, &r)
		if err == nil && (r.StopReason == nil || !knownStopReason(*r.StopReason)) {
			err = errors.New("it has no valid stopReason (end_turn, max_tokens, max_turn_requests, refusal or cancelled), which the schema requires")
		}
	default:
		return
	}
	if err != nil {
		g.mu.Lock()
		g.shape[method] = err
		g.mu.Unlock()
	}
}

func decodeResult(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("it has no result object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("its result does not parse: %w", err)
	}
	return nil
}

func (g *gate) noteVersion(v json.RawMessage) error {
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return errors.New("it has no protocolVersion, which the schema requires")
	}
	// The schema's ProtocolVersion is an integer (uint16); json.Number
	// would also take a quoted one.
	n, err := strconv.ParseUint(string(v), 10, 16)
	if err != nil {
		return fmt.Errorf("its protocolVersion %s is not an integer from 0 to 65535", excerpt(string(v)))
	}
	i := int(n)
	g.mu.Lock()
	g.version = &i
	g.mu.Unlock()
	return nil
}

func knownStopReason(r acp.StopReason) bool {
	switch r {
	case acp.StopReasonEndTurn, acp.StopReasonMaxTokens, acp.StopReasonMaxTurnRequests, acp.StopReasonRefusal, acp.StopReasonCancelled:
		return true
	}
	return false
}

// ignore logs a dropped message, the first few only.
func (g *gate) ignore(what string, attrs ...any) {
	g.mu.Lock()
	g.ignored++
	n := g.ignored
	g.mu.Unlock()
	switch {
	case n <= maxIgnoredLogs:
		g.log.Warn("ignored "+what+" from the agent", attrs...)
	case n == maxIgnoredLogs+1:
		g.log.Warn("ignoring more messages from the agent without logging each")
	}
}

// sentRequest records the method of a request the SDK writes to the agent,
// so that its answer can be checked.
func (g *gate) sentRequest(line []byte) {
	var e envelope
	if json.Unmarshal(line, &e) != nil || e.Method == "" || !e.hasID() {
		return
	}
	g.mu.Lock()
	g.sent[string(bytes.TrimSpace(e.ID))] = e.Method
	g.mu.Unlock()
}

func (g *gate) shapeErr(method string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shape[method]
}

func (g *gate) protocolVersion() (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.version == nil {
		return 0, false
	}
	return *g.version, true
}

func (g *gate) streamErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// tap records the requests written to the agent for the gate. The SDK
// writes each message with one Write call.
type tap struct {
	w io.Writer
	g *gate
}

func (t tap) Write(p []byte) (int, error) {
	t.g.sentRequest(p)
	t.g.client.watch.touch("")
	return t.w.Write(p)
}

// excerpt makes agent-supplied text fit for a log line: bounded, with
// control characters dropped (termsafe.Line, the one such filter).
func excerpt(s string) string { return termsafe.Line(s, 200) }
