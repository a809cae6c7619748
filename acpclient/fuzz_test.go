package acpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// FuzzWriteConfinement sends agent-chosen paths to fs/write_text_file: a
// write either fails or lands inside the workspace, never next to it.
func FuzzWriteConfinement(f *testing.F) {
	for _, s := range []string{"a.txt", "../out.txt", "sub/../../out.txt", "link/out.txt", "/etc/passwd", "./", "", "a/b/c.txt", "..", "link/../x", "\x00"} {
		f.Add(s)
	}
	dir := f.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(ws, "link")); err != nil {
		f.Fatal(err)
	}
	c, err := New(Config{Workspace: ws})
	if err != nil {
		f.Fatal(err)
	}
	c.setSession("s")
	f.Cleanup(func() { c.Close() })
	f.Fuzz(func(t *testing.T, p string) {
		_, _ = c.WriteTextFile(context.Background(), acp.WriteTextFileRequest{SessionId: "s", Path: p, Content: "x"})
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "ws" {
				t.Fatalf("path %q wrote %s outside the workspace", p, e.Name())
			}
		}
	})
}

// FuzzSliceLines checks line/limit slicing never panics and returns a
// substring of the file.
func FuzzSliceLines(f *testing.F) {
	f.Add("a\nb\nc\n", 2, 1)
	f.Add("", 0, 0)
	f.Add("x", -5, -1)
	f.Fuzz(func(t *testing.T, s string, line, limit int) {
		got := sliceLines(s, &line, &limit)
		if !strings.Contains(s, got) {
			t.Fatalf("%q not in %q", got, s)
		}
	})
}

// BenchmarkSessionUpdate measures folding one update into the transcript,
// which the gate does on the connection's reading goroutine.
func BenchmarkSessionUpdate(b *testing.B) {
	c, err := New(Config{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.setSession("s")
	ups := []acp.SessionUpdate{
		acp.UpdateAgentMessageText("some streamed text of an agent message "),
		acp.StartToolCall("t1", "Edit file", acp.WithStartKind(acp.ToolKindEdit)),
		acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)),
		acp.UpdatePlan(acp.PlanEntry{Content: "a"}, acp.PlanEntry{Content: "b"}),
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_ = c.SessionUpdate(ctx, acp.SessionNotification{SessionId: "s", Update: ups[i%len(ups)]})
	}
	// Target: well under 10µs per update, so 1024 queued updates drain in
	// about 10ms.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/update")
}

// FuzzGate feeds arbitrary agent output through the gate: it never panics,
// and what it hands the SDK is whole JSON lines that are answers, requests
// or $/cancel_request, each within MaxLineBytes.
func FuzzGate(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}` + "\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}` + "\n",
		`{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"sessionId":"x","path":"/a"}}` + "\n",
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}` + "\n",
		"not json\n\n\r\n{}\n{\"id\":null}\n",
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
	} {
		f.Add([]byte(s))
	}
	c, err := New(Config{Workspace: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	c.setSession("s")
	f.Fuzz(func(t *testing.T, data []byte) {
		g := newGate(c, bytes.NewReader(data), c.log)
		g.sentRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
		g.sentRequest([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/new"}`))
		out, err := io.ReadAll(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			if len(out) == 0 {
				break
			}
			var e envelope
			if len(line) > MaxLineBytes || json.Unmarshal(line, &e) != nil || !e.hasID() && e.Method != "$/cancel_request" {
				t.Fatalf("handed the SDK %q", line)
			}
		}
	})
}
