package state

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// A container flooding its output fills its journal up to the cap and no
// further: past it, the journal says so once, keeps what changes the state,
// and counts the rest in gap records that also carry where the reader
// resumes. A restart on a journal at its cap carries on counting.
func TestJournalStopsGrowingAtItsCapAndCountsWhatItLeftOut(t *testing.T) {
	ctx := context.Background()
	const limit = 4096
	root := t.TempDir()
	st := Open(root)
	open := func() *Recorder {
		rec := NewRecorder(st, newTestSwarm(), RecorderOptions{Logger: slog.New(slog.DiscardHandler), JournalCap: limit})
		t.Cleanup(func() { rec.Close(ctx) })
		if err := rec.Track(newTestContainer(0, "c"), NewTracker(pendingFile(1))); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	stderr := func(rec *Recorder, i int) {
		r := Record{Cursor: cursor(i), Stream: StreamStderr}
		r.SetRaw([]byte(fmt.Sprintf("npm http fetch GET 200 https://registry.example/pkg-%06d 12ms", i)))
		if err := rec.Record(ctx, "c", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec := open()
	i := 0
	for ; i < 200; i++ {
		stderr(rec, i)
	}
	// A line that changes the state is journaled past the cap.
	if err := recordMsg(t, rec, "c", i, progress(i, "US-001", tasks.InProgress)); err != nil {
		t.Fatal(err)
	}
	i++
	for ; i < 300; i++ {
		stderr(rec, i)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// After a restart the journal is still at its cap.
	rec = open()
	for ; i < 400; i++ {
		stderr(rec, i)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}

	path := st.JournalPath(contract.Sandbox{Swarm: testSwarmID, Container: "c"})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > limit+4*1024 {
		t.Fatalf("journal is %d bytes, want about the cap of %d", fi.Size(), limit)
	}
	recs, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	stderrLines, capNotes, progressed, omitted := tallyCappedJournal(t, recs)
	if capNotes != 1 || progressed != 1 {
		t.Fatalf("%d cap records and %d progress-updates, want 1 and 1", capNotes, progressed)
	}
	if int64(stderrLines)+omitted != 399 {
		t.Fatalf("%d stderr lines journaled + %d counted in gap records = %d, want all 399", stderrLines, omitted, int64(stderrLines)+omitted)
	}
	pos, err := LastPosition(path)
	if err != nil || pos.Stderr != cursor(399) {
		t.Fatalf("position %+v (%v): a reader must resume after the last line left out, %v", pos, err, cursor(399))
	}
}

// tallyCappedJournal counts a capped journal's stderr lines, cap records
// (which must name the cap), progress-updates and the lines its gap
// records left out.
func tallyCappedJournal(t *testing.T, recs []Record) (stderrLines, capNotes, progressed int, omitted int64) {
	t.Helper()
	for _, r := range recs {
		switch {
		case r.Omitted != nil && r.Omitted.Lines == 0:
			capNotes++
			if !strings.Contains(r.Reason, "cap") {
				t.Errorf("cap record says %q", r.Reason)
			}
		case r.Omitted != nil:
			omitted += r.Omitted.Lines
		case r.Stream == StreamStderr:
			stderrLines++
		case r.Type == "progress-update":
			progressed++
		}
	}
	return stderrLines, capNotes, progressed, omitted
}
