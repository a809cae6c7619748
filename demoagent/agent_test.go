package demoagent_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/testwait"
	acp "github.com/coder/acp-go-sdk"
)

// connect wires the demo agent to an acpclient.Client through in-memory pipes.
func connect(t *testing.T, policy string) (*acpclient.Conn, *acpclient.Client, string) {
	t.Helper()
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	p, err := acpclient.ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := acpclient.New(acpclient.Config{Workspace: ws, Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = demoagent.Run(ctx, toAgentR, toClientW, nil)
	}()
	conn := cl.Connect(toAgentW, toClientR)
	t.Cleanup(func() {
		cancel()
		_ = toAgentW.Close()
		_ = toClientW.Close()
		<-done
		_ = cl.Close()
	})
	return conn, cl, ws
}

func prompt(t *testing.T, conn *acpclient.Conn, ws, text string) acp.StopReason {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		t.Fatal(err)
	}
	return r.StopReason
}

func TestDemoAgentTurns(t *testing.T) {
	cases := []struct {
		name     string
		policy   string
		prompt   string
		want     acp.StopReason
		wantFile string
		summary  []string
	}{
		{"writes the file named in the criteria and ends the turn", "allow", "Story US-001\n- File step-1.txt exists\n", acp.StopReasonEndTurn, "step-1.txt",
			[]string{"Write step-1.txt (edit, completed)", "git status --short (execute, completed)", "wrote step-1.txt", "allowed"}},
		{"writes <story>.md without a named file", "allow", "Story US-007: do it", acp.StopReasonEndTurn, "US-007.md", nil},
		{"fail marker refuses", "allow", "Story US-002 [demo:fail]", acp.StopReasonRefusal, "", []string{"refuse"}},
		{"rejected permission refuses without writing", "reject", "Story US-003\n- File x.txt exists", acp.StopReasonRefusal, "", []string{"rejected"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, cl, ws := connect(t, tc.policy)
			if got := prompt(t, conn, ws, tc.prompt); got != tc.want {
				t.Fatalf("stop reason %s want %s; transcript %s", got, tc.want, cl.Transcript().Summary())
			}
			if tc.wantFile != "" {
				b, err := os.ReadFile(filepath.Join(ws, tc.wantFile))
				if err != nil || !strings.Contains(string(b), "demo agent") {
					t.Fatalf("file %s: %v %q", tc.wantFile, err, b)
				}
			}
			if tc.wantFile == "" {
				ents, _ := os.ReadDir(ws)
				if len(ents) != 1 { // only .git
					t.Fatalf("workspace changed: %v", ents)
				}
			}
			sum := cl.Transcript().Summary()
			for _, w := range tc.summary {
				if !strings.Contains(sum, w) {
					t.Errorf("summary %q lacks %q", sum, w)
				}
			}
		})
	}
}

func TestDemoAgentSlowTurnEndsCancelledOnSessionCancel(t *testing.T) {
	conn, cl, ws := connect(t, "allow")
	ctx := context.Background()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan acp.StopReason, 1)
	go func() {
		r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("US-001 [demo:slow]")}})
		if err != nil {
			res <- acp.StopReason("error: " + err.Error())
			return
		}
		res <- r.StopReason
	}()
	testwait.Eventually(t, 10*time.Second, "the agent to start the slow part", func() error {
		if m := cl.Transcript().Message(); !strings.Contains(m, "Taking my time") {
			return fmt.Errorf("its message so far: %q", m)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	cl.Cancel()
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r != acp.StopReasonCancelled {
			t.Fatalf("stop reason %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the cancelled prompt")
	}
}

func TestDemoAgentIgnoresMarkersOfDependencies(t *testing.T) {
	conn, _, ws := connect(t, "allow")
	got := prompt(t, conn, ws, "Story US-002\n- File two.txt exists\n\n"+demoagent.DependencySection+"\n- US-001: completed. Notes: [demo:fail] File one.txt exists\n")
	if got != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "two.txt")); err != nil {
		t.Fatal(err)
	}
}

// TestDemoAgentReportsACostWhenAsked: a turn whose prompt carries
// MarkerCost reports DemoCost in USD (usage_update), which the client
// keeps as the session's cost; one without reports none.
func TestDemoAgentReportsACostWhenAsked(t *testing.T) {
	conn, cl, ws := connect(t, "allow")
	if r := prompt(t, conn, ws, "US-001: file a.txt exists"); r != acp.StopReasonEndTurn {
		t.Fatalf("plain turn: %s", r)
	}
	if c, ok := cl.Cost(); ok {
		t.Fatalf("a cost without the marker: %+v", c)
	}
	if r := prompt(t, conn, ws, "US-002: file b.txt exists "+demoagent.MarkerCost); r != acp.StopReasonEndTurn {
		t.Fatalf("costed turn: %s", r)
	}
	testwait.Eventually(t, 10*time.Second, "the reported cost", func() error {
		if c, ok := cl.Cost(); !ok || c.Amount != demoagent.DemoCost || c.Currency != "USD" {
			return fmt.Errorf("cost %+v %v", c, ok)
		}
		return nil
	})
}
