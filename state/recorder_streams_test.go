package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/tasks"
)

// The engine logs stdout and stderr from separate goroutines, so a stdout
// line can arrive after a stderr line with a later timestamp. It must still
// be journaled and folded, and each stream keeps its own cursor.
func TestStdoutLineAfterALaterStderrLineIsKept(t *testing.T) {
	ctx := context.Background()
	rec, _ := newTestRecorder(t, t.TempDir(), 1, "c")
	logLine := Record{Cursor: cursor(5), Stream: StreamStderr}
	logLine.SetRaw([]byte("agent started"))
	if err := rec.Record(ctx, "c", logLine, nil); err != nil {
		t.Fatal(err)
	}
	if err := recordMsg(t, rec, "c", 4, progress(4, "US-001", tasks.InProgress)); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadJournal(rec.JournalPath("c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Stream != StreamStderr || !recs[1].Valid {
		t.Fatalf("journal %+v, want the stderr line and then the stdout message once", recs)
	}
	if stories, _ := rec.Stories("c"); stories["US-001"] != tasks.InProgress {
		got := stories["US-001"]
		t.Fatalf("US-001 is %q after the fold, want in_progress", got)
	}
	pos, err := LastPosition(rec.JournalPath("c"))
	if err != nil || pos.Stdout != cursor(4) || pos.Stderr != cursor(5) {
		t.Fatalf("position %+v (%v), want stdout at %s and stderr at %s", pos, err, cursor(4), cursor(5))
	}
}

// Journals of earlier versions wrote cursors without "#seq". The journal
// parses cursors only through logcursor, the parser the output reader uses,
// so such a journal resumes (as seq 0) and a cursor neither accepts is an
// error naming the record, not a silently reordered position.
func TestJournalCursorsParseAsTheReaderParsesThem(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.ndjson")
	body := `{"seq":1,"cursor":"2026-11-22T10:31:00.000001Z","time":"2026-11-22T10:31:00Z","stream":"stdout","valid":false,"raw":"x"}` + "\n" +
		`{"seq":2,"cursor":"2026-11-22T10:31:00.000002Z#3","time":"2026-11-22T10:31:00Z","stream":"stderr","valid":false,"raw":"y"}` + "\n"
	if err := os.WriteFile(old, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	pos, err := LastPosition(old)
	if err != nil {
		t.Fatal(err)
	}
	want := logcursor.Position{Stdout: cursor(1), Stderr: logcursor.Cursor{Time: cursor(2).Time, Seq: 3}}
	if pos.Position != want || pos.Seq != 2 {
		t.Fatalf("position %+v, want %+v at seq 2", pos, want)
	}
	bad := filepath.Join(dir, "bad.ndjson")
	if err := os.WriteFile(bad, []byte(`{"seq":1,"cursor":"yesterday","time":"2026-11-22T10:31:00Z","stream":"stdout","valid":false}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LastPosition(bad); err == nil || !strings.Contains(err.Error(), "record at byte 0") {
		t.Fatalf("malformed cursor: %v, want an error naming the record at byte 0", err)
	}
}
