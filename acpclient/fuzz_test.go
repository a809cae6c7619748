package acpclient

import (
	"context"
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

// BenchmarkSessionUpdate measures the session/update handler, which must
// return fast: the SDK drops the connection once 1024 notifications queue up.
func BenchmarkSessionUpdate(b *testing.B) {
	c, err := New(Config{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
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
