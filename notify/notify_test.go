package notify

import (
	"context"
	"encoding/json"
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
	"unicode"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

type receiver struct {
	mu     sync.Mutex
	bodies []string
	types  []string
}

func (r *receiver) handler(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.types = append(r.types, req.Header.Get("Content-Type"))
	r.mu.Unlock()
}

func (r *receiver) wait(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	testwait.Eventually(t, time.Minute, fmt.Sprintf("%d notices", n), func() error {
		r.mu.Lock()
		got = append([]string(nil), r.bodies...)
		r.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d arrived: %q", len(got), got)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	return got
}

const hostile = "Write \x1b[2Jevil\r\n\u202e.md ghp_secret" // control characters, bidi override

func events() []api.Event {
	now := time.Now()
	req := &api.PermissionRequest{ID: "abc123", Title: hostile, Kind: "edit"}
	return []api.Event{
		{Time: now, Kind: api.EventPermissionRequested, RepoPath: "/home/u/repo", SwarmID: "sw1", ContainerName: "aimi-x", StoryID: "US-001", RequestID: "abc123", Request: req, Output: hostile},
		{Time: now, Kind: api.EventContainerExited, RepoPath: "/home/u/repo", SwarmID: "sw1", ContainerName: "aimi-x", StoryID: "US-002", Status: "failed", Code: "AGENT_CRASH", Output: "agent output " + hostile},
		{Time: now, Kind: api.EventContainerExited, RepoPath: "/home/u/repo", SwarmID: "sw1", ContainerName: "aimi-y", Status: "completed"},
		{Time: now, Kind: api.EventSwarmFinished, RepoPath: "/home/u/repo", SwarmID: "sw1"},
		{Time: now, Kind: api.EventProgress, RepoPath: "/home/u/repo", SwarmID: "sw1", ContainerName: "aimi-y", Output: "no notice for this"},
	}
}

func runNotifier(t *testing.T, cfg Config) (context.CancelFunc, chan api.Event) {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan api.Event, 16)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, ch) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel, ch
}

// TestNoticesReachEveryTargetCleanAndAHangingOneHoldsNothing: a JSON
// webhook (Slack's text field), an ntfy topic (plain text) and a command
// each get the four notices, with no control character and no agent
// output; a webhook that hangs and one that redirects delay nobody, and
// their failures are journaled without their URL.
func TestNoticesReachEveryTargetCleanAndAHangingOneHoldsNothing(t *testing.T) {
	slack, ntfy := &receiver{}, &receiver{}
	slackSrv := httptest.NewServer(http.HandlerFunc(slack.handler))
	defer slackSrv.Close()
	ntfySrv := httptest.NewServer(http.HandlerFunc(ntfy.handler))
	defer ntfySrv.Close()
	hang := make(chan struct{})
	hangSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer hangSrv.Close()
	defer close(hang)
	redirect := httptest.NewServer(http.RedirectHandler(slackSrv.URL+"/token-in-redirect", http.StatusFound))
	defer redirect.Close()
	out := filepath.Join(t.TempDir(), "command.txt")
	var jmu sync.Mutex
	var journal []string
	cfg := Config{
		Webhooks: []string{hangSrv.URL + "/hooks/SECRETTOKEN", slackSrv.URL + "/hooks/T0/B0/SECRETTOKEN", NtfyPrefix + ntfySrv.URL + "/topic", redirect.URL + "/SECRETTOKEN"},
		Command:  []string{"/bin/sh", "-c", `printf '%s\n' "$1" >> "$0"`, out},
		Board:    func() string { return "http://127.0.0.1:8080/" },
		Timeout:  500 * time.Millisecond, Backoff: 10 * time.Millisecond, Attempts: 2,
		Journal: func(_ context.Context, sb contract.Sandbox, text string) {
			jmu.Lock()
			journal = append(journal, sb.Container+": "+text)
			jmu.Unlock()
		},
	}
	_, ch := runNotifier(t, cfg)
	for _, e := range events() {
		ch <- e
	}
	bodies := slack.wait(t, 4)
	checkWebhookNotices(t, bodies)
	for _, b := range ntfy.wait(t, 4) {
		if strings.HasPrefix(b, "{") {
			t.Errorf("ntfy got JSON: %s", b)
		}
		checkClean(t, "ntfy", b)
	}
	if ntfy.types[0] != "text/plain; charset=utf-8" || slack.types[0] != "application/json" {
		t.Errorf("content types: ntfy %q, webhook %q", ntfy.types[0], slack.types[0])
	}
	deadline := time.Now().Add(time.Minute)
	waitCommandNotices(t, out, deadline)
	var j string
	testwait.Eventually(t, time.Until(deadline), "the failed deliveries journaled", func() error {
		jmu.Lock()
		j = strings.Join(journal, "\n")
		jmu.Unlock()
		if !strings.Contains(j, "redirect refused") || !strings.Contains(j, "webhook 1") {
			return fmt.Errorf("journal: %s", j)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	if strings.Contains(j, "SECRETTOKEN") || strings.Contains(j, "token-in-redirect") {
		t.Errorf("the journal names a URL: %s", j)
	}
}

// checkWebhookNotices checks the four notices the webhook got: their kinds,
// swarm, container, story and board, the failure's code, no agent output,
// and clean text.
func checkWebhookNotices(t *testing.T, bodies []string) {
	t.Helper()
	kinds := []string{KindRequestWaiting, KindContainerFailed, KindContainerFinished, KindSwarmFinished}
	for i, b := range bodies {
		var no Notice
		if err := json.Unmarshal([]byte(b), &no); err != nil || no.Kind != kinds[i] || no.Text == "" || no.Repo != "/home/u/repo" || no.SwarmID != "sw1" || no.Board != "http://127.0.0.1:8080/" {
			t.Errorf("notice %d: %v %+v", i, err, no)
		}
		wantCtr, wantStory := []string{"aimi-x", "aimi-x", "aimi-y", ""}[i], []string{"US-001", "US-002", "", ""}[i]
		if no.Container != wantCtr || no.StoryID != wantStory {
			t.Errorf("notice %d names container %q story %q, want %q and story %q", i, no.Container, no.StoryID, wantCtr, wantStory)
		}
		if i == 1 && (no.Code != "AGENT_CRASH" || !strings.Contains(no.Text, "AGENT_CRASH") || !strings.Contains(no.Text, "at story US-002")) {
			t.Errorf("the failure notice lacks its code or story: %+v", no)
		}
		if strings.Contains(b, "agent output") {
			t.Errorf("notice %d carries the agent's output: %s", i, b)
		}
		checkClean(t, "webhook", no.Text)
	}
}

// waitCommandNotices waits until deadline for the command to have written its
// four notices to out, and checks them clean.
func waitCommandNotices(t *testing.T, out string, deadline time.Time) {
	t.Helper()
	var b []byte
	testwait.Eventually(t, time.Until(deadline), "4 notices through the command", func() error {
		b, _ = os.ReadFile(out)
		if strings.Count(string(b), "\n") != 4 {
			return fmt.Errorf("the command got: %q", b)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		checkClean(t, "command", l)
	}
}

func checkClean(t *testing.T, where, s string) {
	t.Helper()
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u202e' {
			t.Errorf("%s: control character %U in %q", where, r, s)
		}
	}
}

func TestBadTargetsAreRefused(t *testing.T) {
	for _, c := range []Config{{Webhooks: []string{"ftp://x"}}, {Webhooks: []string{"ntfy:nope"}}, {Command: []string{""}}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestLimitWaitNoticeNamesProviderResetAndContainers: the notice of a
// limit wait carries the provider, the reset, the repository and swarm,
// at most maxListed containers (the text says how many more), all clean,
// and its time is when the limit was first seen, not when it is sent.
func TestLimitWaitNoticeNamesProviderResetAndContainers(t *testing.T) {
	hook := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(hook.handler))
	defer srv.Close()
	n, err := New(Config{Webhooks: []string{srv.URL + "/hooks/T0"}, Board: func() string { return "http://127.0.0.1:8080/" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx, make(chan api.Event)) }()
	defer func() { cancel(); <-done }()
	until := time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC)
	var ctrs []string
	for i := range 12 {
		ctrs = append(ctrs, fmt.Sprintf("aimi-%02d", i))
	}
	ctrs[0] = "aimi-\x1b[2Jx"
	since := until.Add(-time.Minute)
	n.LimitWait(Limit{Provider: "anthropic\r\n", Since: since, Until: until, Repo: "/home/u/repo", SwarmID: "sw1", Containers: ctrs})
	var no Notice
	if err := json.Unmarshal([]byte(hook.wait(t, 1)[0]), &no); err != nil {
		t.Fatal(err)
	}
	if no.Kind != KindLimitWait || no.Provider != "anthropic" || no.Repo != "/home/u/repo" || no.SwarmID != "sw1" || !no.Time.Equal(since) || !no.Until.Equal(until) || len(no.Containers) != maxListed || no.Board != "http://127.0.0.1:8080/" {
		t.Errorf("notice %+v", no)
	}
	if !strings.HasPrefix(no.Text, "repo: model provider anthropic is limited until 14:05:00 UTC") || !strings.Contains(no.Text, "aimi-01") || !strings.Contains(no.Text, "and 2 more") {
		t.Errorf("text %q", no.Text)
	}
	checkClean(t, "limit notice", no.Text)
	for _, c := range no.Containers {
		checkClean(t, "container", c)
	}
}

func TestConflictNotice(t *testing.T) {
	n := &Notifier{}
	no, ok := n.notice(api.Event{Kind: api.EventConflictDetected, RepoPath: "/r/proj", SwarmID: "s",
		Conflict: &api.Conflict{Containers: []string{"aimi-a", "aimi-b\x1b[2J"}, Files: []string{"f.go"}, Kind: "conflict"}})
	if !ok || no.Kind != KindConflict || no.Text != "proj: aimi-a and aimi-b[2J would conflict on f.go" {
		t.Errorf("notice %+v %v", no, ok)
	}
	if _, ok := n.notice(api.Event{Kind: api.EventConflictCleared, Conflict: &api.Conflict{}}); ok {
		t.Error("a cleared conflict is not a notice")
	}
}

// The egress proxy's request (egress.ask) is told like any other: the
// host and port, its containers, the answers it takes.
func TestFetchRequestNotice(t *testing.T) {
	n := &Notifier{}
	req := &api.PermissionRequest{ID: "abc", Kind: "fetch", Title: "Reach pkg.example:443", Command: "GET /x", Containers: []string{"aimi-a", "aimi-b"}}
	no, ok := n.notice(api.Event{Kind: api.EventPermissionRequested, RepoPath: "/r/proj", ContainerName: "aimi-a", RequestID: "abc", Request: req})
	want := "proj: aimi-a story - asks: Reach pkg.example:443 (fetch) for 2 containers. Answer: aimi swarm answer abc once|container|swarm|reject"
	if !ok || no.Kind != KindRequestWaiting || no.Text != want {
		t.Errorf("notice %q %v, want %q", no.Text, ok, want)
	}
}
