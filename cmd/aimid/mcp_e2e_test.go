package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/mcpserver"
	"github.com/aimi-tools/swarm/state"
)

// mcpSession is a test's MCP client session with `aimi mcp`: every tool
// answer is kept for the leak checks, and the resources/updated
// notifications arrive on updated.
type mcpSession struct {
	t       *testing.T
	ctx     context.Context
	sess    *mcp.ClientSession
	stderr  *lockedWriter
	answers []string
	updated chan string
}

// startMCP runs `aimi mcp` for repo and the daemon at sock, as a client
// does (the SDK's CommandTransport), with a credential in its environment
// that no answer may show.
func startMCP(ctx context.Context, t *testing.T, repo, sock string, env ...string) *mcpSession {
	t.Helper()
	m := &mcpSession{t: t, ctx: ctx, stderr: &lockedWriter{w: &bytes.Buffer{}}, updated: make(chan string, 4096)}
	cmd := exec.Command(aimiBinary(t), "mcp", "--repo", repo, "--socket", sock)
	cmd.Env = append(localEnv(), env...)
	cmd.Stderr = m.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "aimi-e2e", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case m.updated <- req.Params.URI:
			default: // the test reads the state again anyway
			}
		},
	})
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to aimi mcp: %v", err)
	}
	m.sess = sess
	t.Cleanup(func() {
		sess.Close()
		if r := raceReport(m.stderr.String()); r != "" {
			t.Errorf("aimi mcp raced (its race detector's report):\n%s", r)
		}
		if t.Failed() {
			t.Logf("aimi mcp stderr:\n%s", m.stderr.String())
		}
	})
	return m
}

// call calls a tool: its text, and whether it is a tool error. A
// protocol error fails the test: refusals must be tool errors.
func (m *mcpSession) call(name string, args map[string]any) (string, bool) {
	m.t.Helper()
	res, err := m.sess.CallTool(m.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("%s %v: a protocol error, not a tool error: %v", name, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	m.answers = append(m.answers, b.String())
	return b.String(), res.IsError
}

// mustCall calls a tool that must succeed.
func (m *mcpSession) mustCall(name string, args map[string]any) string {
	m.t.Helper()
	text, isErr := m.call(name, args)
	if isErr {
		m.t.Fatalf("%s %v: tool error: %s", name, args, text)
	}
	return text
}

// read reads a resource's text.
func (m *mcpSession) read(uri string) string {
	m.t.Helper()
	res, err := m.sess.ReadResource(m.ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		m.t.Fatalf("read %s: %v", uri, err)
	}
	var b strings.Builder
	for _, c := range res.Contents {
		b.WriteString(c.Text)
	}
	m.answers = append(m.answers, b.String())
	return b.String()
}

// stateDoc is the part of the state resource the test reads.
type stateDoc struct {
	Containers []struct {
		ContainerName string                `json:"containerName"`
		Status        state.ContainerStatus `json:"status"`
	} `json:"containers"`
}

// TestMCPDrivesASwarm: a coding agent's view of aimi. `aimi mcp` runs as
// the client starts it (the SDK's CommandTransport) against the real
// daemon, runner and demo agent with policy ask. Hostile arguments (task
// files outside the repository, a huge tail, names with control
// characters) are tool errors with the CLI's message and change nothing;
// the swarm is started, its two permission requests answered through the
// tools (an option not offered refused), its end seen through
// resources/updated of aimi://swarm/state, and its usage, logs and journal
// resource read, and its branch landed (a pick of it, no attempt, refused
// as the CLI refuses it). No answer holds a control character, a gateway
// placeholder or the credential in the server's environment.
func TestMCPDrivesASwarm(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, taskName := inboxRepo(t, "mcp", "[demo:ask-exec]")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true,
		Env: []string{"AIMI_AGENT_PERMISSION_POLICY=ask", "AIMI_AGENT_ASK_TIMEOUT=10m"}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const credential = "mcp-e2e-credential-0123456789abcdef"
	m := startMCP(ctx, t, repo, sock, "AIMI_E2E_API_KEY="+credential)

	checkMCPToolsListed(t, m)
	checkMCPHostileStart(t, m, repo, sock)
	if err := m.sess.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.StateURI}); err != nil {
		t.Fatalf("subscribe to %s: %v", mcpserver.StateURI, err)
	}
	out := m.mustCall("swarm_start", map[string]any{"files": []string{taskName + "-tasks.json"}, "local": true})
	if !strings.Contains(out, "1 container(s)") {
		t.Errorf("swarm_start answered:\n%s", out)
	}
	name := waitMCPContainer(t, m)
	checkMCPHostileNames(t, m, name)
	answerMCPRequests(t, m, name)
	waitMCPDone(t, m, name)
	checkMCPReports(t, m, name)
	if out := m.mustCall("swarm_land", nil); !strings.Contains(out, "landed   "+name) || !strings.Contains(out, "git merge --ff-only aimi/land/") {
		t.Errorf("swarm_land:\n%s", out)
	}
	// A container that is no attempt cannot be picked: the CLI's refusal.
	text, isErr := m.call("swarm_pick", map[string]any{"name": name})
	if code, _, errOut := aimi(ctx, "swarm", "pick", name, "--repo", repo, "--socket", sock); !isErr || code == 0 || strings.TrimSpace(errOut) != "aimi: "+text {
		t.Errorf("swarm_pick of a container that is no attempt: tool %v %q, CLI exit %d %q", isErr, text, code, errOut)
	}
	checkMCPAnswersClean(t, m, credential)
}

// checkMCPToolsListed: every tool is there with a description and an
// input schema.
func checkMCPToolsListed(t *testing.T, m *mcpSession) {
	t.Helper()
	res, err := m.sess.ListTools(m.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tool := range res.Tools {
		have[tool.Name] = tool.Description != "" && tool.InputSchema != nil
	}
	for _, want := range []string{"swarm_start", "swarm_status", "swarm_logs", "swarm_inbox", "swarm_answer", "swarm_stop", "swarm_resume", "swarm_usage", "swarm_land", "swarm_pick"} {
		if !have[want] {
			t.Errorf("tool %s missing, or without description or schema (tools: %v)", want, have)
		}
	}
}

// checkMCPHostileStart: task files outside the repository are refused
// with the CLI's own message, and no swarm starts.
func checkMCPHostileStart(t *testing.T, m *mcpSession, repo, sock string) {
	t.Helper()
	outside := filepath.Join(shortDir(t), "evil-tasks.json")
	os.WriteFile(outside, taskFileJSON("feat/evil", 1), 0o644)
	for _, file := range []string{outside, "../../../etc/passwd", ".aimi/tasks/../../../" + filepath.Base(outside)} {
		text, isErr := m.call("swarm_start", map[string]any{"files": []string{file}, "local": true})
		if !isErr || text == "" {
			t.Errorf("swarm_start of %s: not refused: %s", file, text)
		}
		code, _, errOut := aimi(m.ctx, "swarm", "start", "--file", file, "--local", "--repo", repo, "--socket", sock)
		if code == 0 || strings.TrimSpace(errOut) != "aimi: "+text {
			t.Errorf("swarm_start of %s and the CLI differ:\n tool: %s\n  CLI: exit %d %s", file, text, code, errOut)
		}
	}
	if text, isErr := m.call("swarm_start", map[string]any{"all": true, "files": []string{"x"}}); !isErr || !strings.Contains(text, "exclude each other") {
		t.Errorf("all with files: %v %s", isErr, text)
	}
	if text, isErr := m.call("swarm_status", nil); !isErr || !strings.Contains(text, "no swarm") {
		t.Errorf("after the refusals, swarm_status: %v %s", isErr, text)
	}
	if _, err := os.Stat(state.Open(repo).Path()); !os.IsNotExist(err) {
		t.Errorf("a refused start left a state file: %v", err)
	}
}

// waitMCPContainer waits for swarm_status to list the container.
func waitMCPContainer(t *testing.T, m *mcpSession) string {
	t.Helper()
	var doc stateDoc
	testwait.Eventually(t, time.Minute, "swarm_status to list the container", func() error {
		text := m.mustCall("swarm_status", nil)
		if err := json.Unmarshal([]byte(text), &doc); err != nil || len(doc.Containers) != 1 {
			return fmt.Errorf("swarm_status: %v\n%s", err, text)
		}
		return nil
	}, testwait.Every(300*time.Millisecond))
	return doc.Containers[0].ContainerName
}

// checkMCPHostileNames: a huge tail and names with control characters are
// tool errors that stop nothing and show no control character.
func checkMCPHostileNames(t *testing.T, m *mcpSession, name string) {
	t.Helper()
	if text, isErr := m.call("swarm_logs", map[string]any{"name": name, "tail": 100000000}); !isErr || !strings.Contains(text, "at most 1000 records") {
		t.Errorf("a huge tail: %v %s", isErr, text)
	}
	if text, isErr := m.call("swarm_logs", map[string]any{"name": name, "tail": -3}); !isErr || !strings.Contains(text, "--tail -3") {
		t.Errorf("a negative tail: %v %s", isErr, text)
	}
	evil := name + "\x1b[2J\x1b]0;owned\x07\u202e"
	for _, tool := range []string{"swarm_logs", "swarm_stop", "swarm_usage"} {
		args := map[string]any{"name": evil}
		if tool == "swarm_stop" {
			args = map[string]any{"names": []string{evil}}
		}
		text, isErr := m.call(tool, args)
		if !isErr || !strings.Contains(text, "no such container") {
			t.Errorf("%s of a name with control characters: %v %s", tool, isErr, text)
		}
	}
	text := m.mustCall("swarm_status", nil)
	if strings.Contains(text, `"stopped"`) {
		t.Errorf("a refused stop stopped something:\n%s", text)
	}
}

// answerMCPRequests answers the agent's two requests: the write with its
// id (after an option it did not offer is refused), the command with
// all_from.
func answerMCPRequests(t *testing.T, m *mcpSession, name string) {
	t.Helper()
	w := waitMCPInbox(t, m, "the agent's write request", func(r api.PermissionRequest) bool { return r.Kind == "edit" })
	text, isErr := m.call("swarm_answer", map[string]any{"id": w.ID, "option": "maybe"})
	if !isErr || !strings.Contains(text, `option "maybe" is not one the agent offered`) {
		t.Errorf("an option not offered: %v %s", isErr, text)
	}
	if text, isErr := m.call("swarm_answer", map[string]any{"option": "allow"}); !isErr || !strings.Contains(text, "give ID OPTION") {
		t.Errorf("an answer without id or all_from: %v %s", isErr, text)
	}
	if out := m.mustCall("swarm_answer", map[string]any{"id": w.ID, "option": "allow"}); !strings.Contains(out, "answered allow") {
		t.Errorf("swarm_answer: %s", out)
	}
	x := waitMCPInbox(t, m, "the terminal command's request", func(r api.PermissionRequest) bool { return r.Kind == "execute" })
	if out := m.mustCall("swarm_answer", map[string]any{"all_from": name, "option": "reject"}); !strings.Contains(out, x.ID+" ("+name+"): answered skip") {
		t.Errorf("swarm_answer all_from: %s", out)
	}
}

// waitMCPInbox polls swarm_inbox until one request matches.
func waitMCPInbox(t *testing.T, m *mcpSession, what string, match func(api.PermissionRequest) bool) api.PermissionRequest {
	t.Helper()
	var found api.PermissionRequest
	testwait.Eventually(t, 3*time.Minute, what, func() error {
		text := m.mustCall("swarm_inbox", nil)
		var in api.Inbox
		if err := json.Unmarshal([]byte(text), &in); err != nil {
			return fmt.Errorf("swarm_inbox: %v: %s", err, text)
		}
		for _, r := range in.Requests {
			if match(r) {
				found = r
				return nil
			}
		}
		return fmt.Errorf("swarm_inbox: %s", text)
	}, testwait.Every(300*time.Millisecond))
	return found
}

// waitMCPDone follows resources/updated of the state until the state
// resource says the container completed: the end is seen through the
// notifications alone, with no polling.
func waitMCPDone(t *testing.T, m *mcpSession, name string) {
	t.Helper()
	deadline := time.After(4 * time.Minute)
	notes := 0
	for {
		select {
		case uri := <-m.updated:
			if uri != mcpserver.StateURI {
				continue
			}
			notes++
			var doc stateDoc
			text := m.read(mcpserver.StateURI)
			if err := json.Unmarshal([]byte(text), &doc); err != nil {
				t.Fatalf("the state resource is not JSON: %v\n%s", err, text)
			}
			if len(doc.Containers) == 1 && doc.Containers[0].Status.Terminal() {
				if doc.Containers[0].Status != state.StatusCompleted {
					t.Errorf("container %s ended %s", name, doc.Containers[0].Status)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no resources/updated of %s said the swarm ended (%d seen); status: %s", mcpserver.StateURI, notes, m.mustCall("swarm_status", nil))
		}
	}
}

// checkMCPReports reads usage, logs and the journal resource.
func checkMCPReports(t *testing.T, m *mcpSession, name string) {
	t.Helper()
	var rep cli.UsageReport
	if text := m.mustCall("swarm_usage", nil); json.Unmarshal([]byte(text), &rep) != nil || len(rep.Containers) != 1 || rep.Containers[0].Name != name {
		t.Errorf("swarm_usage: %s", text)
	}
	logs := m.mustCall("swarm_logs", map[string]any{"name": name, "tail": 1000})
	for _, want := range []string{`a person chose "allow"`, `a person chose "skip"`, "completion"} {
		if !strings.Contains(logs, want) {
			t.Errorf("swarm_logs lack %q:\n%s", want, logs)
		}
	}
	if short := m.mustCall("swarm_logs", map[string]any{"name": name, "tail": 2}); strings.Count(strings.TrimSpace(short), "\n") != 1 {
		t.Errorf("swarm_logs tail 2:\n%s", short)
	}
	res, err := m.sess.ListResources(m.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, r := range res.Resources {
		listed = listed || r.URI == mcpserver.JournalURI(name)
	}
	if !listed {
		t.Errorf("the journal of %s is not listed as a resource", name)
	}
	if j := m.read(mcpserver.JournalURI(name)); !strings.Contains(j, "completion") {
		t.Errorf("the journal resource:\n%s", j)
	}
}

// checkMCPAnswersClean: no answer holds a control character (other than
// newline and tab), a gateway placeholder or the server's credential.
func checkMCPAnswersClean(t *testing.T, m *mcpSession, credential string) {
	t.Helper()
	for _, a := range m.answers {
		if i := strings.IndexFunc(a, func(r rune) bool { return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || r == 0x202e }); i >= 0 {
			t.Errorf("an answer holds control character %q: %q", a[i], a)
		}
		if strings.Contains(a, contract.GatewayPlaceholderPrefix) || strings.Contains(a, credential) {
			t.Errorf("an answer holds a secret: %s", a)
		}
	}
}
