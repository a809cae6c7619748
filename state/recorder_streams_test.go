package state

import (
	"context"
	"testing"

	"github.com/aimi-tools/swarm/tasks"
)

// The engine logs stdout and stderr from separate goroutines, so a stdout
// line can arrive after a stderr line with a later timestamp. It must still
// be journaled and folded, and the catch-up cursor is the stdout line's.
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
	// A replay of the stdout line is still dropped.
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
	if err != nil || pos.Cursor != cursor(4) {
		t.Fatalf("position %+v (%v), want the stdout line's cursor %s", pos, err, cursor(4))
	}
}
