package acpclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func newTestClient(t *testing.T, policy string) (*Client, string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Workspace: ws, Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.setSession("s")
	return c, ws
}

func wantInvalidParams(t *testing.T, err error) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("want invalid params error, got %v", err)
	}
}

func TestFSConfinement(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	outsideDir := filepath.Dir(ws)
	secret := filepath.Join(outsideDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outsideDir, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "secret-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(ws, "inner")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	refused := []struct{ name, path string }{
		{"dot-dot leaves the workspace", filepath.Join(ws, "..", "secret.txt")},
		{"relative dot-dot leaves the workspace", "../secret.txt"},
		{"absolute path elsewhere", secret},
		{"symlinked directory pointing out", filepath.Join(ws, "escape", "secret.txt")},
		{"symlinked file pointing out", filepath.Join(ws, "secret-link")},
	}
	for _, tc := range refused {
		t.Run("read: "+tc.name, func(t *testing.T) {
			_, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: tc.path})
			wantInvalidParams(t, err)
		})
		t.Run("write: "+tc.name, func(t *testing.T) {
			_, err := c.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s", Path: tc.path, Content: "pwned"})
			wantInvalidParams(t, err)
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Fatalf("file outside the workspace was changed: %q", b)
	}

	t.Run("write inside makes parents and reads back through an inner symlink", func(t *testing.T) {
		if _, err := c.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "sub", "deep", "a.txt"), Content: "one\ntwo\nthree\n"}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "inner", "deep", "a.txt")})
		if err != nil {
			t.Fatal(err)
		}
		if r.Content != "one\ntwo\nthree\n" {
			t.Fatalf("content %q", r.Content)
		}
	})
	t.Run("missing file is invalid params", func(t *testing.T) {
		_, err := c.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "nope")})
		wantInvalidParams(t, err)
	})
}

func TestReadTextFileLineAndLimit(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ip := func(i int) *int { return &i }
	cases := []struct {
		name        string
		line, limit *int
		want        string
	}{
		{"whole file without line or limit", nil, nil, "1\n2\n3\n4\n"},
		{"from line 2", ip(2), nil, "2\n3\n4\n"},
		{"two lines from line 2", ip(2), ip(2), "2\n3\n"},
		{"limit alone starts at line 1", nil, ip(1), "1\n"},
		{"line past the end is empty", ip(9), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.ReadTextFile(context.Background(), acp.ReadTextFileRequest{SessionId: "s", Path: filepath.Join(ws, "f"), Line: tc.line, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if r.Content != tc.want {
				t.Fatalf("got %q want %q", r.Content, tc.want)
			}
		})
	}
}

func TestCutFrontKeepsUTF8Boundary(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"under the limit is unchanged", "héllo", 10, "héllo"},
		{"ascii keeps the tail", "abcdef", 3, "def"},
		{"cut inside a two-byte rune drops the rune", "aé", 1, ""},
		{"cut inside a four-byte rune drops the rune", "x😀yz", 4, "yz"},
		{"cut on a boundary keeps the rune", "xé", 2, "é"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(cutFront([]byte(tc.in), tc.limit)); got != tc.want {
				t.Fatalf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestTerminalOutputOverLimitIsCutFromTheFront(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	ctx := context.Background()
	// 3000 two-byte runes then a marker; a limit of 101 bytes forces a cut
	// that would land inside a rune.
	script := `i=0; while [ $i -lt 3000 ]; do printf 'é'; i=$((i+1)); done; printf 'END'`
	term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "sh", Args: []string{"-c", script}, OutputByteLimit: acp.Ptr(100)})
	if err != nil {
		t.Fatal(err)
	}
	exit, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s", TerminalId: term.TerminalId})
	if err != nil {
		t.Fatal(err)
	}
	if exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("exit %+v", exit)
	}
	out, err := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s", TerminalId: term.TerminalId})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated {
		t.Fatal("truncated not set")
	}
	if len(out.Output) > 100 || !strings.HasSuffix(out.Output, "END") || strings.ContainsRune(out.Output, '\uFFFD') || !strings.HasPrefix(out.Output, "é") {
		t.Fatalf("bad cut (%d bytes): %q", len(out.Output), out.Output)
	}
	if out.ExitStatus == nil || out.ExitStatus.ExitCode == nil {
		t.Fatal("exit status missing after exit")
	}
	if _, err := c.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: "s", TerminalId: term.TerminalId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s", TerminalId: term.TerminalId}); err == nil {
		t.Fatal("released terminal still answers")
	}
	_ = ws
}

func TestTerminalRunsInWorkspaceAndRefusesCwdOutside(t *testing.T) {
	c, ws := newTestClient(t, "allow")
	ctx := context.Background()
	term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "pwd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s", TerminalId: term.TerminalId}); err != nil {
		t.Fatal(err)
	}
	out, _ := c.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s", TerminalId: term.TerminalId})
	real, _ := filepath.EvalSymlinks(ws)
	if strings.TrimSpace(out.Output) != real {
		t.Fatalf("pwd %q want %q", out.Output, real)
	}
	if err := os.Symlink(filepath.Dir(ws), filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{filepath.Dir(ws), filepath.Join(ws, ".."), filepath.Join(ws, "up")} {
		_, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "pwd", Cwd: acp.Ptr(cwd)})
		wantInvalidParams(t, err)
	}
}

func TestKillTerminalStopsProcessGroup(t *testing.T) {
	c, _ := newTestClient(t, "allow")
	ctx := context.Background()
	term, err := c.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "sh", Args: []string{"-c", "sleep 60 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: "s", TerminalId: term.TerminalId}); err != nil {
		t.Fatal(err)
	}
	exit, err := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s", TerminalId: term.TerminalId})
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal == nil {
		t.Fatalf("want a signal exit, got %+v", exit)
	}
}

func TestPermissionPolicy(t *testing.T) {
	opts := []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "always", OptionId: "always"},
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "once", OptionId: "once"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "no", OptionId: "no"},
	}
	edit, exec := acp.ToolKindEdit, acp.ToolKindExecute
	cases := []struct {
		name   string
		policy string
		kind   *acp.ToolKind
		opts   []acp.PermissionOption
		want   string // option id, or "cancelled"
	}{
		{"allow prefers a one-time allow", "allow", &edit, opts, "once"},
		{"reject picks the reject option", "reject", &edit, opts, "no"},
		{"allow-kinds allows a listed kind", "allow-kinds:read,edit", &edit, opts, "once"},
		{"allow-kinds rejects an unlisted kind", "allow-kinds:read,edit", &exec, opts, "no"},
		{"a call without kind counts as other", "allow-kinds:other", nil, opts, "once"},
		{"no matching option answers cancelled", "reject", &edit, opts[:2], "cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestClient(t, tc.policy)
			r, err := c.RequestPermission(context.Background(), acp.RequestPermissionRequest{SessionId: "s", ToolCall: acp.ToolCallUpdate{ToolCallId: "t", Kind: tc.kind}, Options: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			got := "cancelled"
			if r.Outcome.Selected != nil {
				got = string(r.Outcome.Selected.OptionId)
			}
			if got != tc.want {
				t.Fatalf("got %s want %s", got, tc.want)
			}
		})
	}
	t.Run("after Cancel every request is answered cancelled", func(t *testing.T) {
		c, _ := newTestClient(t, "allow")
		c.Cancel()
		r, _ := c.RequestPermission(context.Background(), acp.RequestPermissionRequest{SessionId: "s", ToolCall: acp.ToolCallUpdate{ToolCallId: "t"}, Options: opts})
		if r.Outcome.Cancelled == nil {
			t.Fatal("not cancelled")
		}
	})
}

func TestParsePolicyRejectsUnknown(t *testing.T) {
	for _, s := range []string{"maybe", "allow-kinds:read,teleport"} {
		if _, err := ParsePolicy(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestTranscriptSummaryNamesToolsPlanAndUnknownKinds(t *testing.T) {
	c, _ := newTestClient(t, "allow")
	ctx := context.Background()
	ups := []acp.SessionUpdate{
		acp.UpdateAgentMessageText("I added the field."),
		acp.UpdateAgentThoughtText("hmm"),
		acp.StartToolCall("c1", "Edit model.go", acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending)),
		acp.UpdateToolCall("c1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)),
		acp.UpdatePlan(acp.PlanEntry{Content: "a", Status: acp.PlanEntryStatusCompleted}, acp.PlanEntry{Content: "b", Status: acp.PlanEntryStatusPending}),
		{}, // a kind this SDK does not know
	}
	for _, u := range ups {
		if err := c.SessionUpdate(ctx, acp.SessionNotification{SessionId: "s", Update: u}); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Transcript().Summary()
	for _, want := range []string{"I added the field.", "Edit model.go (edit, completed)", "Plan: 1 of 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
}
