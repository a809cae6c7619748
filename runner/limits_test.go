package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// envModelAgent turns the test binary into an ACP agent that calls the
// model through the gateway on every prompt and ends its turn in error
// (a JSON-RPC error) on a non-2xx answer, as real agents do after their
// own retries. The value "load" offers session/load; envModelAgentLog
// names a file where it logs each session and prompt.
const (
	envModelAgent    = "RUNNER_TEST_MODEL_AGENT"
	envModelAgentLog = "RUNNER_TEST_MODEL_AGENT_LOG"
)

func modelAgent(mode string, in io.Reader, out io.Writer) {
	logf := func(format string, a ...any) {
		f, err := os.OpenFile(os.Getenv(envModelAgentLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, format+"\n", a...)
			f.Close()
		}
	}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" {
			continue
		}
		answer := func(result any) { enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result}) }
		switch m.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": mode == "load"}})
		case "session/new":
			sid := fmt.Sprintf("sess-%d", time.Now().UnixNano())
			logf("new %s", sid)
			answer(map[string]any{"sessionId": sid})
		case "session/load":
			logf("load %s", m.Params.SessionID)
			answer(map[string]any{})
		case "session/prompt":
			text := ""
			if len(m.Params.Prompt) > 0 {
				text = m.Params.Prompt[0].Text
			}
			logf("prompt %s %q", m.Params.SessionID, text)
			status, err := callModel()
			if err != nil || status/100 != 2 {
				enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": fmt.Sprintf("model call failed: %d %v", status, err)}})
				continue
			}
			answer(map[string]any{"stopReason": "end_turn"})
		}
	}
}

// callModel posts one Messages API call; Go's TLS trusts SSL_CERT_FILE.
func callModel() (int, error) {
	req, _ := http.NewRequest(http.MethodPost, os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// fakeGateway answers the model calls of one container, the first limited
// of them with 429 (or status), and its limits query as the daemon's
// gateway does.
type fakeGateway struct {
	srv     *httptest.Server
	key     string
	limited int
	status  int
	reset   time.Duration
	mu      sync.Mutex
	calls   []time.Time
	met     *contract.GatewayLimit
}

func newFakeGateway(t *testing.T, limited int, reset time.Duration) *fakeGateway {
	g := &fakeGateway{key: contract.GatewayPlaceholderPrefix + strings.Repeat("ab", 32), limited: limited, status: http.StatusTooManyRequests, reset: reset}
	g.srv = httptest.NewTLSServer(g)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch r.URL.Path {
	case contract.GatewayLimitsPath:
		if r.Header.Get("Authorization") != "Bearer "+g.key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ans := contract.GatewayLimits{Now: time.Now(), Limits: []contract.GatewayLimit{}}
		if g.met != nil {
			ans.Limits = append(ans.Limits, *g.met)
		}
		json.NewEncoder(w).Encode(ans)
	case "/anthropic/v1/messages":
		if r.Header.Get("X-Api-Key") != g.key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		now := time.Now()
		if g.met != nil && now.Before(g.met.Until) {
			w.WriteHeader(http.StatusTeapot) // the real gateway holds such a call
			return
		}
		g.calls = append(g.calls, now)
		if len(g.calls) <= g.limited {
			if g.status == http.StatusTooManyRequests {
				g.met = &contract.GatewayLimit{Provider: "anthropic", Hit: now, Until: now.Add(g.reset)}
			}
			w.WriteHeader(g.status)
			return
		}
		io.WriteString(w, `{"type":"message"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// limitScenario is one story whose agent calls the model through g.
func limitScenario(t *testing.T, g *fakeGateway, mode string, retries int) (*scenario, string) {
	t.Helper()
	s := newScenario(t, oneStory(t), "")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "agent.log")
	s.cfg.Agent, s.cfg.AgentCommand, s.cfg.LimitRetries = AgentACP, self, retries
	s.cfg.Env = append(s.cfg.Env, envModelAgent+"="+mode, envModelAgentLog+"="+logFile,
		"ANTHROPIC_BASE_URL="+g.srv.URL+"/anthropic", "ANTHROPIC_API_KEY="+g.key,
		contract.EnvGatewayURL+"="+g.srv.URL+"/", contract.EnvSSLCertFile+"="+ca)
	return s, logFile
}

func agentLog(t *testing.T, file string) []string {
	t.Helper()
	b, _ := os.ReadFile(file)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestLimitedStoryWaitsForTheResetAndGoesOn: the agent's first two turns
// end in error on the provider's 429; the runner learns from the gateway
// that the container was limited, journals the wait and the resumption,
// waits for each reset and runs the story again in a new session told
// what the failed attempt did. The story completes: no failure.
func TestLimitedStoryWaitsForTheResetAndGoesOn(t *testing.T) {
	g := newFakeGateway(t, 2, 1500*time.Millisecond)
	s, logFile := limitScenario(t, g, "new", DefaultLimitRetries)
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Completed {
		t.Fatalf("statuses %v", got)
	}
	var waits, resumes int
	for _, p := range progressOf(msgs) {
		if p.status == acpmsg.StoryFailed {
			t.Errorf("a failed progress-update: %+v", p)
		}
		if strings.Contains(p.output, "waiting for anthropic limit until") && strings.Contains(p.output, "model call failed: 429") {
			waits++
		}
		if strings.Contains(p.output, "anthropic limit reset at") && strings.Contains(p.output, "in a new session told what the failed attempt did") {
			resumes++
		}
	}
	if waits != 2 || resumes != 2 {
		t.Errorf("%d waits and %d resumptions journaled, want 2 each: %+v", waits, resumes, progressOf(msgs))
	}
	g.mu.Lock()
	calls := g.calls
	g.mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("%d model calls, want 3", len(calls))
	}
	for i := 1; i < 3; i++ {
		if d := calls[i].Sub(calls[i-1]); d < 1500*time.Millisecond {
			t.Errorf("call %d came %v after the limited one, before the reset", i+1, d)
		}
	}
	log := agentLog(t, logFile)
	if len(log) != 6 || !strings.Contains(log[3], "ended in error because the anthropic model provider") || strings.Contains(log[1], "ended in error") {
		t.Errorf("agent log:\n%s", strings.Join(log, "\n"))
	}
}

// TestLimitedStoryGoesOnInTheLoadedSession: an agent that offers
// loadSession gets its earlier session back (session/load) and is told
// to go on in it.
func TestLimitedStoryGoesOnInTheLoadedSession(t *testing.T) {
	g := newFakeGateway(t, 1, time.Second)
	s, logFile := limitScenario(t, g, "load", DefaultLimitRetries)
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	if c := completionOf(t, msgs); c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	log := agentLog(t, logFile)
	sid := strings.TrimPrefix(log[0], "new ")
	if len(log) != 4 || log[2] != "load "+sid || !strings.HasPrefix(log[3], "prompt "+sid+` "Your previous turn ended in error because the anthropic`) {
		t.Errorf("agent log:\n%s", strings.Join(log, "\n"))
	}
	found := false
	for _, p := range progressOf(msgs) {
		found = found || strings.Contains(p.output, "in the same session (session/load)")
	}
	if !found {
		t.Errorf("no resumption in the same session journaled: %+v", progressOf(msgs))
	}
}

// TestLimitRetriesRunOut: a limit that holds through agent.limit_retries
// retries fails the story, saying so.
func TestLimitRetriesRunOut(t *testing.T) {
	g := newFakeGateway(t, 10, 500*time.Millisecond)
	s, _ := limitScenario(t, g, "new", 1)
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	errs := strings.Join(completionOf(t, msgs).Errors, "\n")
	if !strings.Contains(errs, "US-001") || !strings.Contains(errs, "the anthropic limit held its model calls through 1 retries (agent.limit_retries 1)") {
		t.Fatalf("errors %q", errs)
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Failed {
		t.Fatalf("statuses %v", got)
	}
	if len(g.calls) != 2 {
		t.Errorf("%d model calls, want 2 (the attempt and one retry)", len(g.calls))
	}
}

// TestErrorWithoutALimitFailsAtOnce: a turn that ended in error while
// nothing limited the container fails the story as before, unretried.
func TestErrorWithoutALimitFailsAtOnce(t *testing.T) {
	g := newFakeGateway(t, 1, time.Second)
	g.status = http.StatusInternalServerError
	s, _ := limitScenario(t, g, "new", DefaultLimitRetries)
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	if got := finalStatuses(t, s); got["US-001"] != tasks.Failed {
		t.Fatalf("statuses %v", got)
	}
	for _, p := range progressOf(msgs) {
		if strings.Contains(p.output, "waiting for") {
			t.Errorf("a wait journaled without a limit: %+v", p)
		}
	}
	if len(g.calls) != 1 {
		t.Errorf("%d model calls, want 1", len(g.calls))
	}
}

func TestLimitRetriesFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(func(k string) string { return map[string]string{contract.EnvLimitRetries: "2"}[k] })
	if err != nil || c.LimitRetries != 2 {
		t.Fatalf("config %v, %v", c.LimitRetries, err)
	}
	c, err = ConfigFromEnv(func(string) string { return "" })
	c.setDefaults()
	if err != nil || c.LimitRetries != DefaultLimitRetries {
		t.Fatalf("default %v, %v", c.LimitRetries, err)
	}
	if _, err := ConfigFromEnv(func(k string) string { return map[string]string{contract.EnvLimitRetries: "-1"}[k] }); err == nil || !strings.Contains(err.Error(), contract.EnvLimitRetries) {
		t.Errorf("-1 accepted: %v", err)
	}
}
