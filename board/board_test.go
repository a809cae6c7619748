package board

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
)

// fakeDaemon scripts the daemon's answers and records the calls.
type fakeDaemon struct {
	mu       sync.Mutex
	calls    []string
	list     api.SwarmList
	stopErr  error
	stopped  []string
	force    *bool
	cleanup  api.CleanupReport
	events   chan api.Event
	records  []state.Record
	journalN string
	logsReq  api.LogsRequest
	listErr  error // List fails with it while set (a daemon that is down)
	inbox    api.Inbox
	answers  []api.AnswerRequest
}

func (f *fakeDaemon) call(c string) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *fakeDaemon) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeDaemon) List(context.Context) (api.SwarmList, error) {
	f.call("list")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list, f.listErr
}

func (f *fakeDaemon) Stop(_ context.Context, repo string, names []string) (api.SwarmView, error) {
	f.call("stop")
	f.mu.Lock()
	f.stopped = names
	f.mu.Unlock()
	if f.stopErr != nil {
		return api.SwarmView{}, f.stopErr
	}
	for _, v := range f.list.Swarms {
		if v.RepoPath == repo {
			return v, nil
		}
	}
	return api.SwarmView{RepoPath: repo, State: &state.Swarm{SwarmID: "s"}}, nil
}

func (f *fakeDaemon) Resume(_ context.Context, repo string, _ bool) (api.SwarmView, error) {
	f.call("resume")
	return api.SwarmView{RepoPath: repo, State: &state.Swarm{SwarmID: "s"}}, nil
}

func (f *fakeDaemon) Cleanup(_ context.Context, repo string, force bool) (api.CleanupReport, error) {
	f.call("cleanup")
	f.mu.Lock()
	f.force = &force
	f.mu.Unlock()
	return f.cleanup, nil
}

func (f *fakeDaemon) Logs(ctx context.Context, req api.LogsRequest, fn func(state.Record) error) error {
	f.call("logs")
	f.mu.Lock()
	f.journalN, f.logsReq = req.Name, req
	f.mu.Unlock()
	for _, r := range f.records {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeDaemon) Events(ctx context.Context, repo string, fn func(api.Event) error) error {
	f.call("events")
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-f.events:
			if !ok {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

const testToken = "0123456789abcdef0123456789abcdef0123456789a"

// serveBoard runs a board for f on a loopback port.
func serveBoard(t *testing.T, f *fakeDaemon) (base string, srv *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err = New(Options{Daemon: f, Token: testToken, Addr: ln.Addr().String(), Heal: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("board shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("board serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), srv
}

// withToken sends the board's token header on every request, as the page
// does.
type withToken struct{}

func (withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(TokenHeader, testToken)
	return http.DefaultTransport.RoundTrip(r)
}

// session returns a client that sends the token header, as the page does.
func session(t *testing.T, base string) *http.Client {
	t.Helper()
	return &http.Client{Transport: withToken{}}
}

func TestWithoutTheTokenEveryRouteButThePageIsRefused(t *testing.T) {
	f := &fakeDaemon{}
	base, _ := serveBoard(t, f)
	cases := []struct{ method, path, body string }{
		{"GET", "/api/swarms", ""},
		{"GET", "/api/swarms?token=" + testToken, ""}, // in the query it is no credential
		{"GET", "/api/events", ""},
		{"GET", "/api/journal?repo=/r&name=n", ""},
		{"POST", "/api/stop", `{"repo":"/r"}`},
		{"POST", "/api/cleanup", `{"repo":"/r"}`},
		{"POST", "/", `{"repo":"/r"}`},
		{"GET", "/favicon.ico", ""},
	}
	for _, c := range cases {
		for _, tok := range []string{"", "wrong" + testToken[5:]} {
			req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.AddCookie(&http.Cookie{Name: "aimi-board", Value: testToken}) // a cookie is no credential
			if tok != "" {
				req.Header.Set(TokenHeader, tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || string(body) != refusal || !resp.Close {
				t.Errorf("%s %s (token %.5q): %d %q close=%t; want 403, only the refusal, and the connection closed", c.method, c.path, tok, resp.StatusCode, body, resp.Close)
			}
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the daemon was asked %v by requests without the token", calls)
	}
}

func TestThePageHoldsNoTokenAndSetsNoCookie(t *testing.T) {
	base, _ := serveBoard(t, &fakeDaemon{})
	u, _ := url.Parse(base)
	open, _ := url.Parse(URL(u.Host, testToken))
	if open.RawQuery != "" || open.Fragment != TokenParam+"="+testToken || open.Path != "/" {
		t.Errorf("URL = %s, want the token in the fragment only", open)
	}
	for _, path := range []string{"/", "/static/board.js", "/static/board.css"} {
		resp, err := http.Get(base + path) // no token: a reload sends none
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(resp.Cookies()) != 0 || strings.Contains(string(body), testToken) {
			t.Errorf("%s: %d, cookies %v, token in it: %t; want 200, no cookie, no token", path, resp.StatusCode, resp.Cookies(), strings.Contains(string(body), testToken))
		}
		if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: Referrer-Policy %q, CSP %q", path, rp, resp.Header.Get("Content-Security-Policy"))
		}
	}
}

func TestAnotherHostNameIsRefusedEvenWithTheToken(t *testing.T) {
	base, _ := serveBoard(t, &fakeDaemon{})
	u, _ := url.Parse(base)
	for _, path := range []string{"/", "/api/swarms"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "rebound.example:" + u.Port()
		resp, err := session(t, base).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s for a DNS-rebound Host got %d, want 403", path, resp.StatusCode)
		}
	}
}

func post(t *testing.T, c *http.Client, base, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestActionsRefuseCrossSiteRequests(t *testing.T) {
	f := &fakeDaemon{}
	base, _ := serveBoard(t, f)
	c := http.DefaultClient
	good := map[string]string{"Content-Type": "application/json", TokenHeader: testToken, "Origin": base, "Sec-Fetch-Site": "same-origin"}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range good {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	bad := map[string]map[string]string{
		"no token header":       with(TokenHeader, ""),
		"wrong token header":    with(TokenHeader, strings.Repeat("x", len(testToken))),
		"another origin":        with("Origin", "http://evil.example"),
		"cross-site fetch":      with("Sec-Fetch-Site", "cross-site"),
		"another loopback port": with("Origin", "http://127.0.0.1:1"),
		"same-site other port":  with("Sec-Fetch-Site", "same-site"),
		"form post":             with("Content-Type", "application/x-www-form-urlencoded"),
	}
	for name, h := range bad {
		if code, body := post(t, c, base, "/api/stop", `{"repo":"/r","names":["a"]}`, h); code != http.StatusForbidden || body != refusal {
			t.Errorf("%s: %d %q, want the refusal", name, code, body)
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Fatalf("refused actions reached the daemon: %v", calls)
	}
	if code, body := post(t, c, base, "/api/stop", `{"repo":"/r","names":["a"]}`, good); code != 200 {
		t.Fatalf("a same-origin stop: %d %s", code, body)
	}
	if strings.Join(f.stopped, ",") != "a" {
		t.Errorf("stop reached the daemon with %v, want [a]", f.stopped)
	}
	if code, _ := post(t, c, base, "/api/stop", `{"repo":"/r","bogus":1}`, good); code != http.StatusBadRequest {
		t.Errorf("an unknown field: %d, want 400", code)
	}
	if code, _ := post(t, c, base, "/api/resume", `{"repo":"/r","retryFailed":true}`, good); code != 200 {
		t.Errorf("resume: %d", code)
	}
}

func TestCleanupNeverForcesAndRefusalsKeepTheirStatus(t *testing.T) {
	f := &fakeDaemon{cleanup: api.CleanupReport{RepoPath: "/r", Kept: []api.Kept{{Name: "aimi-a", Reason: "holds\x1b[31m commits nobody received", Commits: []string{"abc"}}}}}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	h := map[string]string{"Content-Type": "application/json", TokenHeader: testToken}
	code, body := post(t, c, base, "/api/cleanup", `{"repo":"/r"}`, h)
	if code != 200 || f.force == nil || *f.force {
		t.Fatalf("cleanup: %d %s force=%v; want 200 and never forced", code, body, f.force)
	}
	if !strings.Contains(body, `"reason":"holds[31m commits nobody received"`) || !strings.Contains(body, `"commits":["abc"]`) {
		t.Errorf("cleanup report %s: want the kept reason (control characters dropped) and the commits", body)
	}
	f.stopErr = &api.APIError{Status: 404, Body: api.ErrorBody{Error: "no such container in the swarm", Code: api.CodeNotFound}}
	if code, body := post(t, c, base, "/api/stop", `{"repo":"/r","names":["zz"]}`, h); code != 404 || !strings.Contains(body, "no such container") {
		t.Errorf("a refused stop: %d %s, want the daemon's 404 and message", code, body)
	}
	f.stopErr = &daemon.UnreachableError{Socket: "/s", Err: errors.New("connection refused")}
	if code, _ := post(t, c, base, "/api/stop", `{"repo":"/r"}`, h); code != http.StatusBadGateway {
		t.Errorf("no daemon: %d, want 502", code)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, id, data string }

func readEvents(t *testing.T, c *http.Client, u string, want int) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return readEventsWhile(t, ctx, c, u, func(out []sseEvent) bool { return len(out) < want })
}

// readEventsWhile reads the events stream at u while more(events so far).
func readEventsWhile(t *testing.T, ctx context.Context, c *http.Client, u string, more func([]sseEvent) bool) []sseEvent {
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20) // a list of hundreds of containers is one long line
	for more(out) && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func TestEventsStreamTheListThenChangesThenTheListAgain(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event, 4),
		list: api.SwarmList{Swarms: []api.SwarmView{{RepoPath: "/r", State: &state.Swarm{SwarmID: "s1", Containers: []*state.Container{{ContainerName: "aimi-a", Status: state.StatusRunning}}}}}}}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	f.events <- api.Event{RepoPath: "/r", ContainerName: "aimi-a", Kind: api.EventProgress, StoryID: "US-001", StoryStatus: "completed", Output: "done\u202e evil"}
	f.events <- api.Event{RepoPath: "/r", ContainerName: "aimi-a", Kind: api.EventContainerExited, Status: "completed"}
	evs := readEvents(t, c, base+"/api/events", 3)
	names := []string{}
	changes := ""
	for _, e := range evs {
		names = append(names, e.name)
		if e.name == "changes" {
			changes += e.data
		}
	}
	if len(names) < 3 || names[0] != "list" || names[len(names)-1] != "list" {
		t.Fatalf("events %v, want the list, the changes, then a list after the exit", names)
	}
	if !strings.Contains(evs[0].data, `"name":"aimi-a"`) || !strings.Contains(changes, `"output":"done evil"`) || !strings.Contains(changes, `"kind":"container-exited"`) {
		t.Errorf("list %s / changes %s", evs[0].data, changes)
	}
}

func TestJournalStreamsCleanLinesWithIDsAndEnds(t *testing.T) {
	f := &fakeDaemon{records: []state.Record{
		{Seq: 1, Stream: state.StreamStdout, Valid: true, Type: "progress-update", Message: []byte(`{"type":"progress-update","payload":{"storyId":"US-001","status":"in_progress","output":"go\u0007"}}`)},
		{Seq: 2, Stream: state.StreamStderr, Raw: "level=WARN msg=\"slow\x1b[2J\"", Reason: "stderr: log output"},
		{Seq: 3, Stream: state.StreamStdout, Valid: true, Type: "error", Message: []byte(`{"type":"error","payload":{"code":"GIT_CLONE_FAILED","message":"clone failed"}}`)},
		{Seq: 4, Stream: state.StreamStdout, Raw: "not json", Reason: "invalid JSON"},
	}}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	evs := readEvents(t, c, base+"/api/journal?repo=/r&name=aimi-a", 5)
	if len(evs) != 5 || evs[4].name != "end" {
		t.Fatalf("journal events %+v, want 4 lines and the end", evs)
	}
	want := []string{
		`"kind":"message","type":"progress-update","text":"US-001 in_progress: go"`,
		`"stream":"stderr","kind":"log","text":"level=WARN msg=\"slow[2J\""`,
		`"code":"GIT_CLONE_FAILED","text":"clone failed"`,
		`"kind":"invalid","text":"not json","note":"invalid JSON"`,
	}
	for i, w := range want {
		if evs[i].name != "line" || evs[i].id != string(rune('1'+i)) || !strings.Contains(evs[i].data, w) {
			t.Errorf("line %d = %+v, want id %d and %s", i, evs[i], i+1, w)
		}
	}
}

func TestUntrustedTextIsBoundedAndLinksAreWebOnly(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b[31mred\x07", "a[31mred"},
		{"tab\there\nnewline", "tab here newline"},
		{"rtl\u202eoverride\u2066", "rtloverride"},
		{"c1 \u009b2J\u0085 cr\rdel\x7f", "c1 2J cr del"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{strings.Repeat("x", 2100), strings.Repeat("x", 2000) + "…"},
	}
	for _, c := range cases {
		if got := clean(c.in, maxText); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"https://github.com/o/r/pull/1": "https://github.com/o/r/pull/1",
		"http://ghe.local/pr/2":         "http://ghe.local/pr/2",
		"javascript:alert(1)":           "",
		"data:text/html,<script>":       "",
		"//evil.example/x":              "",
	} {
		if got := webURL(in); got != want {
			t.Errorf("webURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// openURL is the URL `aimi swarm ui` prints for the board at base.
func openURL(base string) string { return URL(strings.TrimPrefix(base, "http://"), testToken) }
