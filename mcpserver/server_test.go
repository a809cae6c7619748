package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// credential stands for a model key in the server's environment.
const credential = "sk-ant-mcp-unit-0123456789abcdef"

// connect serves s on in-memory transports and returns a client session;
// updated gets the URIs of resources/updated.
func connect(t *testing.T, s *Server, updated chan<- string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, st) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "unit", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if updated != nil {
				updated <- req.Params.URI
			}
		},
	})
	sess, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		cancel()
		<-done
	})
	return sess
}

func callText(t *testing.T, sess *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String(), res.IsError
}

// hostile is what a container may print: terminal escapes, a bidi
// override, the credential and a gateway placeholder.
const hostile = "boom\x1b[2J\x1b]0;owned\x07\u202e " + credential + " " + contract.GatewayPlaceholderPrefix + "00112233445566778899aabbccddeeff"

// TestAnswersAreFilteredRedactedAndBounded: a container error the stop
// answer quotes and a journal line reach the agent without escapes, the
// credential or the placeholder; a journal answer bigger than maxOutput
// is cut with a note; a huge tail is a tool error.
func TestAnswersAreFilteredRedactedAndBounded(t *testing.T) {
	t.Parallel()
	repo := daemontest.ShortTempDir(t)
	fake := &daemontest.Swarms{
		StatusFunc: func(repo string) (api.SwarmView, error) {
			v := daemontest.View(repo)
			for i := range 3000 {
				v.State.Containers = append(v.State.Containers, &state.Container{ContainerName: fmt.Sprintf("aimi-%04d", i), TaskFilePath: ".aimi/tasks/x-tasks.json", BranchName: "feat/x", Status: state.StatusRunning})
			}
			return v, nil
		},
		StopFunc: func(repo string, _ []string) (api.SwarmView, error) {
			v := daemontest.View(repo)
			v.Containers = []api.ContainerDetail{{Name: "aimi-x", Errors: []api.ErrorDetail{{Code: "CRASH", Message: hostile}}}}
			return v, nil
		},
		JournalFunc: func(_ context.Context, req api.LogsRequest) (<-chan state.Record, error) {
			ch := make(chan state.Record, req.Tail)
			for i := range req.Tail {
				r := state.Record{Seq: int64(i), Time: time.Unix(0, 0), Stream: state.StreamStderr}
				r.SetRaw([]byte(hostile + strings.Repeat(" padding", 40)))
				ch <- r
			}
			close(ch)
			return ch, nil
		},
	}
	sock, _ := daemontest.Serve(t, fake)
	sess := connect(t, New(Options{Repo: repo, Socket: sock, Secrets: KnownSecrets([]string{"ANTHROPIC_API_KEY=" + credential})}), nil)

	stop, isErr := callText(t, sess, "swarm_stop", nil)
	logs, _ := callText(t, sess, "swarm_logs", map[string]any{"name": "aimi-x", "tail": 3})
	big, _ := callText(t, sess, "swarm_logs", map[string]any{"name": "aimi-x", "tail": 1000, "json": true})
	for name, text := range map[string]string{"stop": stop, "logs": logs, "big logs": big} {
		if strings.ContainsAny(text, "\x1b\x07\u202e") || strings.Contains(text, credential) || strings.Contains(text, contract.GatewayPlaceholderPrefix) {
			t.Errorf("%s answer not cleaned: %q", name, text)
		}
	}
	if isErr || !strings.Contains(stop, `boom\u001b[2J`) || !strings.Contains(stop, "[secret:ANTHROPIC_API_KEY]") || !strings.Contains(stop, "[secret:"+contract.GatewayPlaceholderName+"]") {
		t.Errorf("stop answer: %v %q", isErr, stop)
	}
	if len(big) > maxOutput+200 || !strings.Contains(big, "[answer cut at 128 KiB") {
		t.Errorf("a journal answer of 1000 long records: %d bytes, ends %q", len(big), big[max(0, len(big)-200):])
	}
	if text, isErr := callText(t, sess, "swarm_status", nil); isErr || len(text) > maxOutput+200 || !strings.HasSuffix(text, cutNote) {
		t.Errorf("the status of 3000 containers: error %v, %d bytes, ends %q", isErr, len(text), text[max(0, len(text)-200):])
	}
	if text, isErr := callText(t, sess, "swarm_logs", map[string]any{"name": "aimi-x", "tail": 1001}); !isErr || !strings.Contains(text, "at most 1000") {
		t.Errorf("tail 1001: %v %s", isErr, text)
	}
}

// TestEventsNotifySubscribers: a daemon event of a container sends
// resources/updated for the state and that container's journal to the
// client that subscribed, and lists the journal as a resource.
func TestEventsNotifySubscribers(t *testing.T) {
	t.Parallel()
	repo := daemontest.ShortTempDir(t)
	fake := &daemontest.Swarms{Events: make(chan api.Event, 1)}
	sock, _ := daemontest.Serve(t, fake)
	updated := make(chan string, 64)
	sess := connect(t, New(Options{Repo: repo, Socket: sock}), updated)
	ctx := context.Background()
	for _, uri := range []string{StateURI, JournalURI("aimi-one")} {
		if err := sess.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	deadline := time.After(time.Minute)
	for !got[StateURI] || !got[JournalURI("aimi-one")] {
		select {
		case fake.Events <- api.Event{RepoPath: repo, ContainerName: "aimi-one", Kind: api.EventProgress}:
		case uri := <-updated:
			got[uri] = true
		case <-deadline:
			t.Fatalf("notified of %v only", got)
		}
	}
	res, err := sess.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if want := fmt.Sprint([]string{JournalURI("aimi-one"), StateURI}); fmt.Sprint(uris) != want {
		t.Errorf("resources %v, want %s", uris, want)
	}
}

// TestPrintConfig: each client's snippet names `aimi mcp` with the flags
// given, in the client's shape; an unknown client is refused with the
// list.
func TestPrintConfig(t *testing.T) {
	t.Parallel()
	cmd := []string{"aimi", "mcp", "--socket", "/run/aimi/aimid.sock"}
	for _, client := range ClientNames() {
		snippet, where, err := PrintConfig(client, cmd)
		if err != nil || where == "" {
			t.Fatalf("%s: %v", client, err)
		}
		if client == "codex" {
			if want := "[mcp_servers.aimi]\ncommand = \"aimi\"\nargs = [\"mcp\", \"--socket\", \"/run/aimi/aimid.sock\"]\n"; snippet != want {
				t.Errorf("codex:\n%s", snippet)
			}
			continue
		}
		var doc map[string]map[string]map[string]any
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(snippet), &raw); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", client, err, snippet)
		}
		key := "mcpServers"
		if client == "opencode" {
			key = "mcp"
		}
		doc = map[string]map[string]map[string]any{}
		var servers map[string]map[string]any
		if err := json.Unmarshal(raw[key], &servers); err != nil || servers["aimi"] == nil {
			t.Fatalf("%s: no %s.aimi:\n%s", client, key, snippet)
		}
		doc[key] = servers
		if got := fmt.Sprint(servers["aimi"]["command"], servers["aimi"]["args"]); !strings.Contains(got, "aimi") || !strings.Contains(got, "/run/aimi/aimid.sock") {
			t.Errorf("%s: %s", client, snippet)
		}
	}
	if _, _, err := PrintConfig("cursor", cmd); err == nil || !strings.Contains(err.Error(), "claude-code, codex, gemini, opencode") {
		t.Errorf("an unknown client: %v", err)
	}
}

// TestRefusalsKeepWhatCameBefore: a start without a selection lists the
// task files before it refuses, and status without a daemon says so
// before the state file's error, as on a terminal.
func TestRefusalsKeepWhatCameBefore(t *testing.T) {
	t.Parallel()
	repo := daemontest.ShortTempDir(t)
	if err := os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, ".aimi", "tasks", "one-tasks.json"), []byte(`{"metadata":{"branchName":"feat/one"},"userStories":[]}`), 0o644)
	sess := connect(t, New(Options{Repo: repo, Socket: filepath.Join(repo, "none.sock")}), nil)
	text, isErr := callText(t, sess, "swarm_start", nil)
	if !isErr || !strings.Contains(text, ".aimi/tasks/one-tasks.json  feat/one") || !strings.Contains(text, "no task file selected and stdin is not a terminal; pass --all") {
		t.Errorf("a start without a selection: %v\n%s", isErr, text)
	}
	text, isErr = callText(t, sess, "swarm_status", nil)
	if !isErr || !strings.HasPrefix(text, "daemon not running; showing the state file\nno swarm state in ") {
		t.Errorf("status without a daemon: %v\n%s", isErr, text)
	}
	text, isErr = callText(t, sess, "swarm_inbox", nil)
	if !isErr || !strings.Contains(text, "no aimi daemon running at") || !strings.Contains(text, "aimid &") {
		t.Errorf("inbox without a daemon: %v\n%s", isErr, text)
	}
}
