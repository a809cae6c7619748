package acpclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// Every request names a session; only the one session/new created is
// served, and none before it.
func TestRequestsForNoSessionOfOursAreRefused(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Workspace: ws, Policy: Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	calls := func(sid acp.SessionId) map[string]error {
		_, r := c.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: sid, Path: filepath.Join(ws, "f.txt")})
		_, w := c.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: sid, Path: filepath.Join(ws, "g.txt"), Content: "y"})
		_, p := c.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: sid, Options: []acp.PermissionOption{{OptionId: "a", Kind: acp.PermissionOptionKindAllowOnce}}})
		_, term := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: sid, Command: "true"})
		_, out := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: sid, TerminalId: "t"})
		_, kill := c.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: sid, TerminalId: "t"})
		_, wait := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: sid, TerminalId: "t"})
		_, rel := c.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: sid, TerminalId: "t"})
		u := c.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateAgentMessageText("FOREIGN")})
		return map[string]error{"read": r, "write": w, "permission": p, "create terminal": term, "terminal output": out,
			"kill terminal": kill, "wait terminal": wait, "release terminal": rel, "update": u}
	}
	refused := func(sid acp.SessionId) {
		t.Helper()
		for name, err := range calls(sid) {
			var re *acp.RequestError
			if !errors.As(err, &re) || re.Code != -32602 {
				t.Errorf("%s for session %q: %v, want invalid params", name, sid, err)
			}
		}
	}
	refused("") // before session/new: no session is ours
	refused("s")
	c.setSession("s")
	refused("other")
	if _, err := os.Stat(filepath.Join(ws, "g.txt")); err == nil {
		t.Error("a write for no session of ours landed")
	}
	if s := c.Transcript().Summary(); s != "The agent reported nothing." {
		t.Errorf("summary %q", s)
	}
	if _, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "f.txt")}); err != nil {
		t.Errorf("our own session refused: %v", err)
	}
}
