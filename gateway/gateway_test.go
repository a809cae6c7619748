package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

const realKey = "sk-real-0123456789abcdef"

// fakeAnthropic accepts only the real key in x-api-key and answers
// /v1/messages with JSON, or with an SSE stream whose second event waits
// until the test says the first arrived.
type fakeAnthropic struct {
	next chan struct{}
	mu   sync.Mutex
	seen []http.Header
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.Header.Clone())
	f.mu.Unlock()
	if r.Header.Get("X-Api-Key") != realKey || r.URL.Path != "/v1/messages" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error"}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "41")
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
	w.(http.Flusher).Flush()
	select {
	case <-f.next:
	case <-time.After(time.Minute):
		return
	}
	fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

type recorder struct {
	mu    sync.Mutex
	calls []Call
	body  bytes.Buffer
}

func (r *recorder) Begin(c *Call) Tap { return r }
func (r *recorder) Body(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.body.Write(p)
}
func (r *recorder) End(c *Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, *c)
}

// waitCalls returns the calls observed once there are at least n: the
// observer hears a call's end as the gateway closes the upstream's
// answer, just after the sandbox read its last byte.
func (r *recorder) waitCalls(t testing.TB, n int) []Call {
	t.Helper()
	var calls []Call
	testwait.Eventually(t, time.Minute, fmt.Sprintf("the observer to hear %d calls", n), func() error {
		r.mu.Lock()
		calls = slices.Clone(r.calls)
		r.mu.Unlock()
		if len(calls) < n {
			return fmt.Errorf("observed %d calls: %+v", len(calls), calls)
		}
		return nil
	})
	return calls
}

type fixture struct {
	s    *Service
	up   *fakeAnthropic
	rec  *recorder
	logs *bytes.Buffer
	pool *x509.CertPool
	dir  string
}

func newFixture(t *testing.T, lim Limits) *fixture {
	t.Helper()
	up := &fakeAnthropic{next: make(chan struct{})}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	provs := Builtin()
	a := provs["anthropic"]
	a.URL, _ = ParseURL(srv.URL)
	provs["anthropic"] = a
	dir := t.TempDir()
	logs := &bytes.Buffer{}
	rec := &recorder{}
	s, err := New(Options{
		DataDir: filepath.Join(dir, "gateway"), CADir: filepath.Join(dir, "ca"),
		Providers: provs, Keys: map[string]string{"ANTHROPIC_API_KEY": realKey, "OPENAI_API_KEY": "sk-openai-real"},
		Observer: rec, Limits: lim,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.ListenOn(context.Background(), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM)
	return &fixture{s: s, up: up, rec: rec, logs: logs, pool: pool, dir: dir}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// client talks to the gateway from source address from.
func (f *fixture) client(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: f.pool}}}
}

func post(t *testing.T, c *http.Client, base, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestGatewayPutsTheRealKeyInAndStreamsUnbuffered(t *testing.T) {
	f := newFixture(t, Limits{})
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ph, base := g.Env["ANTHROPIC_API_KEY"], g.Env["ANTHROPIC_BASE_URL"]
	if !strings.HasPrefix(ph, prefix) || !strings.HasPrefix(base, "https://127.0.0.1:") || !strings.HasSuffix(base, "/anthropic") {
		t.Fatalf("grant env: key %q base %q", ph, base)
	}
	if g.Env["OPENAI_BASE_URL"] == "" || g.Env["OPENAI_API_KEY"] == ph {
		t.Fatalf("every key gets its own placeholder and its provider's base URL: %v", keysOf(g.Env))
	}
	c := f.client("127.0.0.1")
	resp := post(t, c, base, ph, `{"model":"m","max_tokens":5,"messages":[]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"hello"`) {
		t.Fatalf("JSON call: %d %s", resp.StatusCode, b)
	}

	resp = post(t, c, base, ph, `{"model":"m","stream":true,"messages":[]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, "message_start") {
		t.Fatalf("first event before the second was written: %q %v", first, err)
	}
	close(f.up.next) // the provider writes the second event only now
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("stream end: %q", rest)
	}

	f.up.mu.Lock()
	for _, h := range f.up.seen {
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, prefix) {
					t.Errorf("the provider got a placeholder in %s", k)
				}
			}
		}
	}
	f.up.mu.Unlock()
	f.rec.waitCalls(t, 2)
	f.rec.mu.Lock()
	if len(f.rec.calls) != 2 || f.rec.calls[0].Status != 200 || f.rec.calls[0].Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "41" ||
		f.rec.calls[0].Container != "aimi-one" || f.rec.calls[0].Path != "/v1/messages" || !strings.Contains(f.rec.body.String(), `"output_tokens":1`) {
		t.Errorf("observer saw %+v, body %q", f.rec.calls, f.rec.body.String())
	}
	f.rec.mu.Unlock()
	checkNoSecret(t, f, ph)
}

func TestPlaceholderRefusedFromAnotherContainerAfterRevokeAndForAnotherProvider(t *testing.T) {
	f := newFixture(t, Limits{})
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ph, base := g.Env["ANTHROPIC_API_KEY"], g.Env["ANTHROPIC_BASE_URL"]
	body := `{"model":"m","messages":[]}`
	if resp := post(t, f.client("127.0.0.1"), base, ph, body); resp.StatusCode != 200 {
		t.Fatalf("own container: %d", resp.StatusCode)
	}
	if resp := post(t, f.client("127.0.0.2"), base, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another container's placeholder: %d, want 401", resp.StatusCode)
	}
	if resp := post(t, f.client("127.0.0.1"), base, "sk-guess", body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no placeholder: %d, want 401", resp.StatusCode)
	}
	openaiBase := g.Env["OPENAI_BASE_URL"]
	if resp := post(t, f.client("127.0.0.1"), openaiBase, ph, body); resp.StatusCode != http.StatusForbidden {
		t.Errorf("anthropic placeholder at the openai path: %d, want 403", resp.StatusCode)
	}
	// A restarted daemon knows the placeholder (hash) and its binding.
	f.s.Close()
	s2, err := New(Options{DataDir: filepath.Join(f.dir, "gateway"), CADir: filepath.Join(f.dir, "ca"), Providers: f.s.providers, Keys: f.s.keys})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if resp := post(t, f.client("127.0.0.1"), base, ph, body); resp.StatusCode != 200 {
		t.Errorf("after a restart: %d, want 200", resp.StatusCode)
	}
	// Granted again (a daemon killed between handing a warm sandbox its
	// claim and noting it): the container may hold either placeholder;
	// one grant further back is dead.
	again, err := s2.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	phAgain := again.Env["ANTHROPIC_API_KEY"]
	for _, p := range []string{ph, phAgain} {
		if resp := post(t, f.client("127.0.0.1"), base, p, body); resp.StatusCode != 200 {
			t.Errorf("after a grant again: %d, want 200", resp.StatusCode)
		}
	}
	if _, err := s2.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if resp := post(t, f.client("127.0.0.1"), base, ph, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a placeholder two grants back: %d, want 401", resp.StatusCode)
	}
	s2.Revoke(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"})
	for _, p := range []string{ph, phAgain} {
		if resp := post(t, f.client("127.0.0.1"), base, p, body); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("revoked placeholder: %d, want 401", resp.StatusCode)
		}
	}
	grants, _ := os.ReadFile(filepath.Join(f.dir, "gateway", grantsName))
	if bytes.Contains(grants, []byte(ph)) || bytes.Contains(grants, []byte(realKey)) {
		t.Errorf("grants.json holds a placeholder or key:\n%s", grants)
	}
	checkNoSecret(t, f, ph)
}

func TestBodyAndInFlightBounds(t *testing.T) {
	f := newFixture(t, Limits{MaxBodyBytes: 1024})
	g, _ := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1")
	resp := post(t, f.client("127.0.0.1"), g.Env["ANTHROPIC_BASE_URL"], g.Env["ANTHROPIC_API_KEY"], strings.Repeat("x", 4096))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d, want 413", resp.StatusCode)
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func checkNoSecret(t *testing.T, f *fixture, ph string) {
	t.Helper()
	logs := f.logs.String()
	if strings.Contains(logs, realKey) || strings.Contains(logs, ph) || strings.Contains(logs, "sk-openai-real") {
		t.Errorf("the log holds a key or placeholder:\n%s", logs)
	}
}

func TestParseURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://api.anthropic.com": true, "http://127.0.0.1:8080/v1/": true,
		"ftp://x": false, "https://": false, "https://u:p@h": false, "https://h/?a=b": false, "api.openai.com": false, "": false,
	} {
		if _, err := ParseURL(raw); (err == nil) != ok {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
	u, _ := ParseURL("http://127.0.0.1:8080/v1/")
	if got := upstreamURL(u, "/chat/completions", url.Values{}).String(); got != "http://127.0.0.1:8080/v1/chat/completions" {
		t.Errorf("upstream %s", got)
	}
}
