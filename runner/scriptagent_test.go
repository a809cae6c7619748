package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
	acp "github.com/coder/acp-go-sdk"
)

// envScriptAgent turns the test binary into a scripted ACP agent that
// breaks one rule of the protocol, named by the variable's value.
const envScriptAgent = "RUNNER_TEST_SCRIPT_AGENT"

// scriptAgent speaks raw JSON lines so that it can do what no SDK agent
// would. Behaviours:
//
//	burst           20,000 session/update notifications, then the answer
//	silent          never answers initialize
//	silent-session  answers initialize, never session/new
//	version=<json>  answers initialize with that protocolVersion ("none": absent)
//	empty-session   answers session/new with {}
//	auth-required   answers session/new with auth_required (-32000)
//	no-stop-reason  answers session/prompt with {}
//	foreign         updates before initialize and for another session, and
//	                fs requests naming another session
//	fatal           writes 8 KiB of chatter to stderr, then "FATAL: ...", and dies
//	long-line       writes an 11 MiB line while prompted
//	stall...        see stallScript
func scriptAgent(mode string, in io.Reader, out io.Writer) {
	a := &scriptedAgent{mode: mode, w: bufio.NewWriter(out), sid: "sess-1", got: map[string]string{}, nextID: 100}
	stalls := newStallScript(mode, a.sid, a.send, a.answer)

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m scriptMsg
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "" {
			a.onAnswer(m)
			continue
		}
		if stalls.handle(m.Method, m.ID) {
			continue
		}
		switch m.Method {
		case "initialize":
			a.initialize(m.ID)
		case "session/new":
			a.sessionNew(m.ID)
		case "session/prompt":
			a.prompt(m.ID)
		}
	}
}

// scriptMsg is a line the scripted agent reads: a request, a notification
// or an answer to one of its own requests.
type scriptMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// scriptedAgent is the state of scriptAgent's conversation.
type scriptedAgent struct {
	mode string
	w    *bufio.Writer
	sid  string
	// Answers to the agent's own requests (fs/*) arrive on the same stream.
	asked    []string
	got      map[string]string
	nextID   int
	promptID json.RawMessage
}

func (a *scriptedAgent) send(v any) {
	b, _ := json.Marshal(v)
	a.w.Write(b)
	a.w.WriteByte('\n')
	a.w.Flush()
}

func (a *scriptedAgent) update(sid, text string) {
	a.send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
		"sessionId": sid, "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}}})
}

func (a *scriptedAgent) answer(id json.RawMessage, result any) {
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *scriptedAgent) request(method string, params any) {
	a.nextID++
	a.asked = append(a.asked, fmt.Sprint(a.nextID))
	a.send(map[string]any{"jsonrpc": "2.0", "id": a.nextID, "method": method, "params": params})
}

// onAnswer records the answer to one of the agent's own requests; with all
// of them answered it reports them and ends the prompt that waits on them.
func (a *scriptedAgent) onAnswer(m scriptMsg) {
	if len(m.Error) > 0 {
		a.got[string(m.ID)] = `"refused"`
	} else {
		a.got[string(m.ID)] = `"served"`
	}
	if a.promptID != nil && len(a.got) == len(a.asked) {
		var res []string
		for _, id := range a.asked {
			res = append(res, a.got[id])
		}
		a.update(a.sid, "fs answers: "+strings.Join(res, ","))
		a.answer(a.promptID, map[string]any{"stopReason": "end_turn"})
		a.promptID = nil
	}
}

func (a *scriptedAgent) initialize(id json.RawMessage) {
	switch {
	case a.mode == "silent":
		return
	case a.mode == "foreign":
		a.update(a.sid, "FOREIGN before initialize")
	case strings.HasPrefix(a.mode, "version="):
		v := strings.TrimPrefix(a.mode, "version=")
		r := map[string]any{"agentCapabilities": map[string]any{}}
		if v != "none" {
			r["protocolVersion"] = json.RawMessage(v)
		}
		a.answer(id, r)
		return
	}
	a.answer(id, map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{},
		"authMethods": []any{map[string]any{"id": "api-key", "name": "API key"}}})
}

func (a *scriptedAgent) sessionNew(id json.RawMessage) {
	switch a.mode {
	case "silent-session":
		return
	case "empty-session":
		a.answer(id, map[string]any{})
		return
	case "auth-required":
		a.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32000, "message": "Authentication required"}})
		return
	case "foreign":
		a.update(a.sid, "FOREIGN before the session exists")
	}
	a.answer(id, map[string]any{"sessionId": a.sid})
}

func (a *scriptedAgent) prompt(id json.RawMessage) {
	switch a.mode {
	case "burst":
		for i := range 20000 {
			a.update(a.sid, fmt.Sprintf("chunk %d. ", i))
		}
	case "no-stop-reason":
		a.answer(id, map[string]any{})
		return
	case "foreign":
		a.update("someone-else", "FOREIGN for another session")
		a.update(a.sid, "own update.")
		ws, _ := os.Getwd()
		a.promptID = id
		a.request("fs/read_text_file", map[string]any{"sessionId": "someone-else", "path": filepath.Join(ws, "secret.txt")})
		a.request("fs/write_text_file", map[string]any{"sessionId": "someone-else", "path": filepath.Join(ws, "planted.txt"), "content": "x"})
		a.request("fs/read_text_file", map[string]any{"sessionId": a.sid, "path": filepath.Join(ws, "secret.txt")})
		return
	case "fatal":
		fmt.Fprint(os.Stderr, strings.Repeat("agent: routine chatter line\n", 300))
		fmt.Fprint(os.Stderr, "FATAL: the model endpoint refused the API key\n")
		os.Exit(7)
	case "long-line":
		a.w.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + a.sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`)
		a.w.WriteString(strings.Repeat("x", 11<<20))
		a.w.WriteString("\"}}}}\n")
		a.w.Flush()
	}
	a.answer(id, map[string]any{"stopReason": "end_turn"})
}

// scriptBackend runs the scripted agent in mode as an ACP backend.
func scriptBackend(t *testing.T, mode string, handshake time.Duration) (*acpBackend, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := acpclient.ParsePolicy("allow")
	return &acpBackend{
		argv:             []string{self},
		env:              append(os.Environ(), envScriptAgent+"="+mode, "GORACE=atexit_sleep_ms=0"),
		policy:           p,
		grace:            2 * time.Second,
		handshakeTimeout: handshake,
		log:              slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}, t.TempDir()
}

func TestBurstOfUpdatesBeforeTheAnswerCompletesTheStory(t *testing.T) {
	b, dir := scriptBackend(t, "burst", time.Minute)
	o := b.runStory(context.Background(), "US-001", "go", dir)
	if o.err != nil || o.stop != acp.StopReasonEndTurn {
		t.Fatalf("outcome %+v, err %v", o, o.err)
	}
	if !strings.Contains(o.summary, "chunk 1") {
		t.Fatalf("summary lacks the streamed text: %q", o.summary)
	}
}

func TestHandshakeTimeoutEndsASilentAgent(t *testing.T) {
	for _, tc := range []struct{ mode, step string }{{"silent", "initialize"}, {"silent-session", "session/new"}} {
		t.Run(tc.mode, func(t *testing.T) {
			// Long enough for the scripted agent (this test binary, run
			// again) to start and answer initialize on a loaded machine:
			// at 300 ms the session/new case failed at initialize there.
			b, dir := scriptBackend(t, tc.mode, 3*time.Second)
			start := time.Now()
			o := b.runStory(context.Background(), "US-001", "go", dir)
			if o.err == nil {
				t.Fatalf("outcome %+v, err %v", o, o.err)
			}
			for _, want := range []string{"did not answer " + tc.step + " within 3s", contract.EnvHandshakeTimeout, "agent.handshake_timeout"} {
				if !strings.Contains(o.err.Error(), want) {
					t.Errorf("error %q lacks %q", o.err, want)
				}
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

func TestHandshakeTimeoutFromEnv(t *testing.T) {
	env := map[string]string{contract.EnvHandshakeTimeout: "45s"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c.HandshakeTimeout != 45*time.Second {
		t.Fatalf("config %v, %v", c.HandshakeTimeout, err)
	}
	env[contract.EnvHandshakeTimeout] = "soon"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), contract.EnvHandshakeTimeout) {
		t.Fatalf("bad value accepted: %v", err)
	}
	c = Config{}
	c.setDefaults()
	if c.HandshakeTimeout != DefaultHandshakeTimeout {
		t.Fatalf("default %v", c.HandshakeTimeout)
	}
}

func TestAgentAnswersThatBreakTheSchemaFailTheStory(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"version=2", "the agent chose ACP protocol version 2 and acp-runner speaks version 1 only"},
		{"version=0", "the agent chose ACP protocol version 0"},
		{"version=none", "initialize breaks the ACP protocol: it has no protocolVersion"},
		{`version="1"`, "initialize breaks the ACP protocol"},
		{"empty-session", "session/new breaks the ACP protocol: it has no sessionId"},
		{"no-stop-reason", "session/prompt breaks the ACP protocol: it has no valid stopReason"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			b, dir := scriptBackend(t, tc.mode, time.Minute)
			o := b.runStory(context.Background(), "US-001", "go", dir)
			if o.err == nil || !strings.Contains(o.err.Error(), tc.want) {
				t.Fatalf("outcome %+v, err %v, want error with %q", o, o.err, tc.want)
			}
		})
	}
}

func TestMessagesForNoSessionOfOursAreIgnored(t *testing.T) {
	b, dir := scriptBackend(t, "foreign", time.Minute)
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := b.runStory(context.Background(), "US-001", "go", dir)
	if o.err != nil || o.stop != acp.StopReasonEndTurn {
		t.Fatalf("outcome %+v, err %v", o, o.err)
	}
	if strings.Contains(o.summary, "FOREIGN") {
		t.Errorf("updates of no session of ours were folded in: %q", o.summary)
	}
	if !strings.Contains(o.summary, "own update.") || !strings.Contains(o.summary, `fs answers: "refused","refused","served"`) {
		t.Errorf("summary %q: want our own update, and fs requests served for our session only", o.summary)
	}
	if _, err := os.Stat(filepath.Join(dir, "planted.txt")); err == nil {
		t.Error("fs/write_text_file for another session was served")
	}
}

func TestCrashReportKeepsTheLastLineOfStderr(t *testing.T) {
	b, dir := scriptBackend(t, "fatal", time.Minute)
	o := b.runStory(context.Background(), "US-001", "go", dir)
	if o.err == nil || !strings.Contains(o.err.Error(), "FATAL: the model endpoint refused the API key") {
		t.Fatalf("outcome %+v, err %v", o, o.err)
	}
}

func TestOverlongLineSaysSo(t *testing.T) {
	b, dir := scriptBackend(t, "long-line", time.Minute)
	o := b.runStory(context.Background(), "US-001", "go", dir)
	if o.err == nil || !strings.Contains(o.err.Error(), "line of more than") || strings.Contains(o.err.Error(), "peer disconnected") {
		t.Fatalf("outcome %+v, err %v", o, o.err)
	}
}

func TestLastWordsKeepsTheEnd(t *testing.T) {
	s := strings.Repeat("noise ", 2000) + "\x1b[2J\nFATAL: reason\n"
	got := lastWords(s, 40)
	if !strings.HasSuffix(got, "FATAL: reason") || strings.ContainsRune(got, 0x1b) || len([]rune(got)) > 40 {
		t.Fatalf("%q", got)
	}
}

func TestAgentThatRequiresAuthenticationSaysWhichMethods(t *testing.T) {
	b, dir := scriptBackend(t, "auth-required", time.Minute)
	o := b.runStory(context.Background(), "US-001", "go", dir)
	if o.err == nil || !strings.Contains(o.err.Error(), "requires authentication: set "+contract.EnvAgentAuthMethod+" to one of [api-key]") {
		t.Fatalf("outcome %+v, err %v", o, o.err)
	}
	// The wait a crash gets (up to processExitWait for the agent's exit)
	// is in the crash report's path, whose error names the step
	// ("agent session/new: ...", "agent exited during session/new"). A
	// bound on the time taken would count this test binary's start as the
	// agent too, over a second on a loaded machine.
	if strings.Contains(o.err.Error(), "session/new") {
		t.Errorf("error %q is a crash report: an explained refusal needs no wait for a crash", o.err)
	}
}
