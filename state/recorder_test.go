package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/tasks"
)

func cursor(i int) logcursor.Cursor {
	return logcursor.Cursor{Time: t0.Add(time.Duration(i) * time.Microsecond)}
}

// newTestRecorder tracks the named containers, each with a pendingFile(n).
func newTestRecorder(t *testing.T, root string, n int, names ...string) (*Recorder, *Store) {
	t.Helper()
	st := Open(root)
	rec := NewRecorder(st, newTestSwarm(), RecorderOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { rec.Close(context.Background()) })
	for i, name := range names {
		if err := rec.Track(newTestContainer(i, name), NewTracker(pendingFile(n))); err != nil {
			t.Fatal(err)
		}
	}
	return rec, st
}

func recordMsg(t *testing.T, rec *Recorder, name string, i int, m acpmsg.Message) error {
	t.Helper()
	return rec.Record(context.Background(), name, Record{Cursor: cursor(i), Stream: StreamStdout}, &m)
}

func TestRecorderJournalsThenSaves(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	rec, st := newTestRecorder(t, root, 2, "aimi-swarm-auth")
	msgs := []acpmsg.Message{taskRequest(0), progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed),
		progress(3, "US-002", tasks.InProgress)}
	for i, m := range msgs {
		if err := recordMsg(t, rec, "aimi-swarm-auth", i, m); err != nil {
			t.Fatal(err)
		}
	}
	bad := Record{Cursor: cursor(4), Stream: StreamStderr, Reason: "line is not JSON"}
	bad.SetRaw([]byte("npm WARN \xff\xfe"))
	if err := rec.Record(ctx, "aimi-swarm-auth", bad, nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := validateState(compileSchema(t), b); err != nil {
		t.Fatalf("state file does not validate: %v", err)
	}
	sw, _ := st.Load(ctx)
	c := sw.Container("aimi-swarm-auth")
	if c.Status != StatusRunning || c.StoryProgress != (Progress{Total: 2, Completed: 1, InProgress: 1}) {
		t.Fatalf("state = %s %+v", c.Status, c.StoryProgress)
	}

	jpath := rec.JournalPath("aimi-swarm-auth")
	if want := filepath.Join(root, ".aimi", "swarm", testSwarmID, "aimi-swarm-auth.ndjson"); jpath != want {
		t.Fatalf("journal at %s, want %s", jpath, want)
	}
	recs, err := ReadJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Cursor != cursor(i) {
			t.Errorf("record %d: seq %d cursor %s", i, r.Seq, r.Cursor)
		}
	}
	if r := recs[1]; !r.Valid || r.Type != "progress-update" || r.Stream != StreamStdout {
		t.Errorf("valid record = %+v", r)
	}
	if m, err := recs[2].DecodeMessage(); err != nil || m.Payload.(*acpmsg.ProgressUpdate).Status != "completed" {
		t.Errorf("journaled message = %+v, %v", m, err)
	}
	if r := recs[4]; r.Valid || r.Reason != "line is not JSON" || !bytes.Equal(r.RawLine(), []byte("npm WARN \xff\xfe")) {
		t.Errorf("invalid record = %+v (raw %q)", r, r.RawLine())
	}
	raw, _ := os.ReadFile(jpath)
	if bytes.Contains(raw, []byte("s3cret")) || !bytes.Contains(raw, []byte(`"API_TOKEN":"[redacted]"`)) {
		t.Errorf("task-request envVars not redacted in the journal:\n%s", raw)
	}
	// Each stream has its own cursor: the engine orders the two only
	// approximately against each other.
	if pos, _ := LastPosition(jpath); pos != (Position{Seq: 5, Position: logcursor.Position{Stdout: cursor(3), Stderr: cursor(4)}}) {
		t.Errorf("LastPosition = %+v", pos)
	}
}

func TestRecorderRejections(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		msgs []acpmsg.Message
		mut  func(*acpmsg.Message)
	}{
		{"transition against the table", []acpmsg.Message{progress(1, "US-001", tasks.Completed)}, nil},
		{"message of another swarm", []acpmsg.Message{progress(1, "US-001", tasks.InProgress)},
			func(m *acpmsg.Message) { m.SwarmID = "00000000-0000-4000-8000-000000000000" }},
		{"message of another container", []acpmsg.Message{progress(1, "US-001", tasks.InProgress)},
			func(m *acpmsg.Message) { m.ContainerID = "fff000fff000" }},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is journaled as rejected and changes nothing", func(t *testing.T) {
			rec, st := newTestRecorder(t, t.TempDir(), 1, "c")
			m := tc.msgs[0]
			if tc.mut != nil {
				tc.mut(&m)
			}
			err := recordMsg(t, rec, "c", 1, m)
			var rej *RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("Record = %v, want *RejectedError", err)
			}
			rec.Flush(ctx)
			sw, _ := st.Load(ctx)
			if c := sw.Container("c"); c.Status != StatusPending || c.StoryProgress.Pending != 1 {
				t.Fatalf("state changed: %+v", c)
			}
			recs, _ := ReadJournal(rec.JournalPath("c"))
			if len(recs) != 1 || recs[0].Rejected != rej.Reason {
				t.Fatalf("journal = %+v", recs)
			}
			if s := rec.Stats(); s.Rejected != 1 || s.Records != 1 {
				t.Fatalf("stats = %+v", s)
			}
		})
	}
}

// Dropping repeated lines is the reader's rule alone (container.Lines):
// the recorder journals what it is given, so a second layer cannot disagree
// with the first about which copy of a line counts.
func TestRecorderJournalsEveryRecordItIsGiven(t *testing.T) {
	ctx := context.Background()
	rec, _ := newTestRecorder(t, t.TempDir(), 1, "c")
	recordMsg(t, rec, "c", 1, progress(1, "US-001", tasks.InProgress))
	recordMsg(t, rec, "c", 2, progress(2, "US-001", tasks.Completed))
	recordMsg(t, rec, "c", 1, progress(1, "US-001", tasks.InProgress))
	recordMsg(t, rec, "c", 2, progress(2, "US-001", tasks.Completed))
	rec.Flush(ctx)
	recs, _ := ReadJournal(rec.JournalPath("c"))
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(recs), recs)
	}
	if stories, _ := rec.Stories("c"); stories["US-001"] != tasks.Completed {
		t.Fatalf("US-001 is %q: the fold must take a repeated message as a no-op", stories["US-001"])
	}
}

func TestRecorderRestartRestoresTheFoldAndContinuesTheJournal(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st := Open(root)
	rec := NewRecorder(st, newTestSwarm(), RecorderOptions{})
	c := newTestContainer(0, "c")
	rec.Track(c, NewTracker(pendingFile(3)))
	msgs := []acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed),
		progress(3, "US-002", tasks.Skipped), progress(4, "US-003", tasks.InProgress)}
	for i, m := range msgs {
		recordMsg(t, rec, "c", i, m)
	}
	want, _ := rec.Stories("c")
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// a crash mid-append leaves a torn line
	jpath := st.JournalPath(contract.Sandbox{Swarm: testSwarmID, Container: "c"})
	f, _ := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":5,"cursor":"2026`)
	f.Close()

	tr, pos, err := RestoreTracker(jpath, pendingFile(3))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(tr.Stories(), want) || pos != (Position{Seq: 4, Position: logcursor.Position{Stdout: cursor(3)}}) {
		t.Fatalf("restored %v at %+v, want %v", tr.Stories(), pos, want)
	}
	sw, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := NewRecorder(st, sw, RecorderOptions{})
	defer rec2.Close(ctx)
	if err := rec2.Track(sw.Container("c"), tr); err != nil {
		t.Fatal(err)
	}
	recordMsg(t, rec2, "c", 5, progress(5, "US-003", tasks.Completed))
	recordMsg(t, rec2, "c", 6, completion(6, "completed", ptr("https://x.test/pr/7")))
	if err := rec2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadJournal(jpath)
	if err != nil {
		t.Fatalf("journal after restart: %v", err)
	}
	if len(recs) != 6 || recs[4].Seq != 5 || recs[5].Seq != 6 {
		t.Fatalf("journal after restart: %+v", recs)
	}
	got, _ := st.Load(ctx)
	gc := got.Container("c")
	if gc.Status != StatusCompleted || gc.StoryProgress != (Progress{Total: 3, Completed: 2}) || *gc.PRURL != "https://x.test/pr/7" {
		t.Fatalf("state after restart: %+v %+v", gc, gc.StoryProgress)
	}
}

func TestRecorderSaveKeepsOtherToolsEntriesAndReplacesCorruptFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	rec, st := newTestRecorder(t, root, 1, "mine")
	rec.Flush(ctx)
	st.Update(ctx, func(s *Swarm) error {
		s.Containers = append(s.Containers, newTestContainer(7, "theirs"))
		return nil
	})
	recordMsg(t, rec, "mine", 1, progress(1, "US-001", tasks.InProgress))
	rec.Flush(ctx)
	sw, _ := st.Load(ctx)
	if len(sw.Containers) != 2 || sw.Container("theirs") == nil || sw.Container("mine").Status != StatusRunning {
		t.Fatalf("after merge: %+v", sw.Containers)
	}

	os.WriteFile(st.Path(), []byte("{garbage"), 0o644)
	recordMsg(t, rec, "mine", 2, progress(2, "US-001", tasks.Completed))
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sw, err := st.Load(ctx)
	if err != nil || sw.Container("mine").StoryProgress.Completed != 1 {
		t.Fatalf("after corrupt file: %+v %v", sw, err)
	}
	aside, _ := filepath.Glob(st.Path() + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("corrupt file not kept aside: %v", aside)
	}
}

func TestRecorderLifecycleErrors(t *testing.T) {
	ctx := context.Background()
	rec, _ := newTestRecorder(t, t.TempDir(), 1, "c")
	if err := rec.Track(newTestContainer(0, "c"), NewTracker(nil)); err == nil || !strings.Contains(err.Error(), "already tracked") {
		t.Errorf("second Track = %v", err)
	}
	if err := recordMsg(t, rec, "nope", 1, taskRequest(1)); err == nil {
		t.Error("Record of an untracked container succeeded")
	}
	if err := rec.Record(ctx, "c", Record{Cursor: cursor(1)}, nil); err == nil {
		t.Error("Record without a stream succeeded (the journal would not read back)")
	}
	if err := rec.UpdateContainer("c", func(c *Container) { c.ACPPID = ptr(7); c.Status = StatusCompleted }); err != nil {
		t.Fatal(err)
	}
	if s := rec.Snapshot().Container("c"); *s.ACPPID != 7 || s.Status != StatusPending {
		t.Errorf("UpdateContainer: pid %v status %s (the fold owns status)", *s.ACPPID, s.Status)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recordMsg(t, rec, "c", 1, taskRequest(1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v", err)
	}
}

// TestRecorderConcurrentUse records from several goroutines while others
// read snapshots, stories and positions and flush; run with -race.
func TestRecorderConcurrentUse(t *testing.T) {
	const containers, perContainer = 4, 300
	ctx := context.Background()
	names := []string{"c0", "c1", "c2", "c3"}
	rec, st := newTestRecorder(t, t.TempDir(), 64, names...)
	msgs := endlessStream(perContainer, 64)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = rec.Snapshot()
			_, _ = rec.Stories("c1")
			_, _ = rec.Position("c2")
			_ = rec.Stats()
			if err := rec.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var writers sync.WaitGroup
	for ci, name := range names {
		writers.Go(func() {
			for i, m := range msgs {
				m.ContainerID = fmt.Sprintf("abc000abc%03x", ci)
				if err := rec.Record(ctx, name, Record{Cursor: cursor(i), Stream: StreamStdout}, &m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sw, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fold(pendingFile(64), msgs).progress
	for _, name := range names {
		recs, err := ReadJournal(rec.JournalPath(name))
		if err != nil || len(recs) != perContainer {
			t.Fatalf("%s: %d records, %v", name, len(recs), err)
		}
		if got := sw.Container(name).StoryProgress; got != want {
			t.Errorf("%s: state %+v, want %+v", name, got, want)
		}
	}
}

func TestRestoreSkipsRecordsRejectedTheFirstTime(t *testing.T) {
	ctx := context.Background()
	rec, _ := newTestRecorder(t, t.TempDir(), 1, "c")
	m := progress(1, "US-001", tasks.InProgress)
	m.ContainerID = "fff000fff000" // another container's message
	recordMsg(t, rec, "c", 1, m)
	rec.Flush(ctx)
	tr, _, err := RestoreTracker(rec.JournalPath("c"), pendingFile(1))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Stories()["US-001"] != tasks.Pending || tr.Status() != StatusPending {
		t.Fatalf("a rejected record was applied on restore: %v %s", tr.Stories(), tr.Status())
	}
}

func TestRecorderUntrackThenTrackAgain(t *testing.T) {
	ctx := context.Background()
	rec, st := newTestRecorder(t, t.TempDir(), 1, "c", "d")
	recordMsg(t, rec, "c", 1, progress(1, "US-001", tasks.InProgress))
	recordMsg(t, rec, "c", 2, progress(2, "US-001", tasks.Failed))
	if err := rec.Untrack(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := recordMsg(t, rec, "c", 3, progress(3, "US-001", tasks.InProgress)); err == nil {
		t.Fatal("Record after Untrack succeeded")
	}
	if rec.Snapshot().Container("c") != nil {
		t.Fatal("untracked entry still in the snapshot")
	}
	sw, _ := st.Load(ctx)
	if c := sw.Container("c"); c == nil || c.StoryProgress.Failed != 1 {
		t.Fatalf("file entry after Untrack: %+v", c)
	}
	// a rerun: fresh fold, journal continues
	if err := rec.Track(newTestContainer(0, "c"), NewTracker(pendingFile(1))); err != nil {
		t.Fatal(err)
	}
	recordMsg(t, rec, "c", 3, progress(3, "US-001", tasks.InProgress))
	rec.Flush(ctx)
	sw, _ = st.Load(ctx)
	if c := sw.Container("c"); c.StoryProgress.InProgress != 1 || c.StoryProgress.Failed != 0 || len(sw.Containers) != 2 {
		t.Fatalf("after re-track: %+v", sw.Containers)
	}
	if recs, _ := ReadJournal(rec.JournalPath("c")); len(recs) != 3 || recs[2].Seq != 3 {
		t.Fatalf("journal after re-track: %+v", recs)
	}
}

// readFrom collects what ScanJournalFrom gives from offset.
func readFrom(path string, offset int64) ([]Record, int64, error) {
	var recs []Record
	next, err := ScanJournalFrom(path, offset, func(r Record) error { recs = append(recs, r); return nil })
	return recs, next, err
}

// TestScanJournalFromReadsEachRecordOnce: a follower that passes back the
// offset it got sees every record exactly once while the journal grows,
// and a torn last line is left for the next read.
func TestScanJournalFromReadsEachRecordOnce(t *testing.T) {
	ctx := context.Background()
	rec, _ := newTestRecorder(t, t.TempDir(), 2, "c")
	path := rec.JournalPath("c")
	recordMsg(t, rec, "c", 1, progress(1, "US-001", tasks.InProgress))
	rec.Flush(ctx)
	first, off, err := readFrom(path, 0)
	if err != nil || len(first) != 1 || first[0].Seq != 1 {
		t.Fatalf("first read: %+v %v", first, err)
	}
	recordMsg(t, rec, "c", 2, progress(2, "US-001", tasks.Completed))
	recordMsg(t, rec, "c", 3, progress(3, "US-002", tasks.InProgress))
	rec.Flush(ctx)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":4,"cursor":"2026`) // torn: a write in progress
	f.Close()
	second, off2, err := readFrom(path, off)
	if err != nil || len(second) != 2 || second[0].Seq != 2 || second[1].Seq != 3 {
		t.Fatalf("second read from %d: %+v %v", off, second, err)
	}
	if st, _ := os.Stat(path); off2 != st.Size()-int64(len(`{"seq":4,"cursor":"2026`)) {
		t.Fatalf("next offset %d, want the end of the last complete line", off2)
	}
	if again, off3, err := readFrom(path, off2); err != nil || len(again) != 0 || off3 != off2 {
		t.Fatalf("read at the torn tail: %+v %d %v, want nothing and the same offset", again, off3, err)
	}
}

// The daemon's note that it could not publish a finished container's
// branch is journaled as applied, changes no status, and survives a
// restart's replay; the same message from the container is refused.
func TestRecorderPublishNoteIsTheDaemonsOnly(t *testing.T) {
	ctx := context.Background()
	rec, st := newTestRecorder(t, t.TempDir(), 1, "c")
	for i, m := range []acpmsg.Message{progress(1, "US-001", tasks.InProgress), progress(2, "US-001", tasks.Completed), completion(3, "completed", nil)} {
		if err := recordMsg(t, rec, "c", i, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := recordMsg(t, rec, "c", 3, errorMsg(4, acpmsg.CodePublishFailed)); err == nil {
		t.Fatal("a container's PUBLISH_FAILED was applied")
	}
	note := errorMsg(5, acpmsg.CodePublishFailed)
	if err := rec.Record(ctx, "c", Record{Stream: StreamDaemon, Valid: true}, &note); err != nil {
		t.Fatalf("the daemon's note: %v", err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sw, _ := st.Load(ctx)
	if c := sw.Container("c"); c.Status != StatusCompleted {
		t.Fatalf("status %s after the note, want completed", c.Status)
	}
	recs, _ := ReadJournal(rec.JournalPath("c"))
	if n := len(recs); n != 5 || recs[3].Rejected == "" || recs[4].Rejected != "" || recs[4].Stream != StreamDaemon {
		t.Fatalf("journal = %+v", recs)
	}
	tr, _, err := RestoreTracker(rec.JournalPath("c"), pendingFile(1))
	if err != nil || tr.Status() != StatusCompleted {
		t.Fatalf("restored %v, %v; want completed", tr.Status(), err)
	}
}
