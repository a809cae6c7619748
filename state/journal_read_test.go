package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeTimedJournal journals n stderr lines for container "c", one second
// apart from t0, every tenth one longer than the backward reader's chunk,
// and leaves a torn line after them. It returns the journal's path.
func writeTimedJournal(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	now := t0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	rec := NewRecorder(Open(t.TempDir()), newTestSwarm(), RecorderOptions{Logger: slog.New(slog.DiscardHandler), Now: clock})
	if err := rec.Track(newTestContainer(0, "c"), NewTracker(pendingFile(1))); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		line := fmt.Sprintf("line %d", i)
		if i%10 == 0 {
			line += strings.Repeat("x", backChunk+100)
		}
		r := Record{Cursor: cursor(i), Stream: StreamStderr}
		r.SetRaw([]byte(line))
		if err := rec.Record(ctx, "c", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	path := rec.JournalPath("c")
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":999,"cursor":"2026`) // torn: a write in progress
	f.Close()
	return path
}

// TestJournalStartReadsTheEndBackwards: a tail, a time and a seq each pick
// the last records of a journal, together the fewest of them; the torn last
// line is never one of them, and a selection larger than the journal is
// all of it.
func TestJournalStartReadsTheEndBackwards(t *testing.T) {
	const n = 50
	path := writeTimedJournal(t, n)
	all, err := ReadJournal(path)
	if err != nil || len(all) != n {
		t.Fatalf("journal: %d records, %v", len(all), err)
	}
	at := func(seq int) time.Time { // the time of seq, or a second after the last
		if seq > n {
			return all[n-1].Time.Add(time.Second)
		}
		return all[seq-1].Time
	}
	for _, tt := range []struct {
		name      string
		from      From
		firstSeq  int64 // 0: nothing
		wantCount int
	}{
		{"whole", From{}, 1, n},
		{"tail 1", From{Tail: 1}, n, 1},
		{"tail 7", From{Tail: 7}, n - 6, 7},
		{"tail past the start", From{Tail: n + 10}, 1, n},
		{"since", From{Since: at(41)}, 41, n - 40},
		{"since between records", From{Since: at(41).Add(-time.Millisecond)}, 41, n - 40},
		{"since after the end", From{Since: at(n + 1)}, 0, 0},
		{"since before the start", From{Since: t0}, 1, n},
		{"after seq", From{AfterSeq: 30}, 31, n - 30},
		{"after the last seq", From{AfterSeq: n}, 0, 0},
		{"tail and after seq", From{Tail: 5, AfterSeq: 30}, n - 4, 5},
		{"after seq and tail", From{Tail: 40, AfterSeq: 30}, 31, n - 30},
		{"since and tail", From{Tail: 40, Since: at(45)}, 45, n - 44},
	} {
		t.Run(tt.name, func(t *testing.T) {
			off, err := JournalStart(path, tt.from)
			if err != nil {
				t.Fatal(err)
			}
			recs, _, err := readFrom(path, off)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tt.wantCount || (len(recs) > 0 && recs[0].Seq != tt.firstSeq) {
				t.Fatalf("from %+v: %d records from seq %v, want %d from seq %d", tt.from, len(recs), seqs(recs), tt.wantCount, tt.firstSeq)
			}
			if len(recs) > 0 && recs[len(recs)-1].Seq != n {
				t.Fatalf("last seq %d, want %d", recs[len(recs)-1].Seq, n)
			}
		})
	}
	if off, err := JournalStart(filepath.Join(filepath.Dir(path), "missing.ndjson"), From{Tail: 3}); err != nil || off != 0 {
		t.Fatalf("missing journal: %d %v, want 0 and no error", off, err)
	}
}

func seqs(recs []Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// TestScanJournalStopsWhenTold: StopScan ends a scan early without an
// error; any other error of the callback is returned.
func TestScanJournalStopsWhenTold(t *testing.T) {
	path := writeTimedJournal(t, 5)
	n := 0
	if err := ScanJournal(path, func(r Record) error {
		n++
		if r.Seq == 2 {
			return StopScan
		}
		return nil
	}); err != nil || n != 2 {
		t.Fatalf("stopped scan: %d records, %v; want 2 and no error", n, err)
	}
	boom := fmt.Errorf("boom")
	if err := ScanJournal(path, func(Record) error { return boom }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("callback error: %v", err)
	}
}

// FuzzJournalStart: for a journal of any content, a tail starts at a line
// and holds at most that many complete lines; it never includes the torn
// last line.
func FuzzJournalStart(f *testing.F) {
	f.Add([]byte("a\nb\nc\ntorn"), uint8(2))
	f.Add([]byte("\n\n\n"), uint8(5))
	f.Add([]byte("no newline"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, tail uint8) {
		path := filepath.Join(t.TempDir(), "j.ndjson")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		off, err := JournalStart(path, From{Tail: int(tail)})
		if err != nil {
			t.Fatal(err) // no line here is over the record bound
		}
		complete := bytes.LastIndexByte(data, '\n') + 1
		if off < 0 || off > int64(complete) || (off > 0 && data[off-1] != '\n') {
			t.Fatalf("offset %d is not the start of a line of %q", off, data)
		}
		lines := bytes.Count(data[off:complete], []byte{'\n'})
		if want := min(int(tail), bytes.Count(data, []byte{'\n'})); tail > 0 && lines != want {
			t.Fatalf("tail %d: %d lines from %d, want %d", tail, lines, off, want)
		}
	})
}

// forwardPosition is lastPosition's meaning, read from the start: every
// record advances the position.
func forwardPosition(t *testing.T, path string) (Position, bool) {
	var pos Position
	capped := false
	if err := ScanJournal(path, func(r Record) error {
		pos.advance(r)
		capped = capped || r.Omitted != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pos, capped
}

// FuzzLastPositionReadsBackwardsWhatAForwardReadGives: for journals of
// any mix of streams, cursors (some zero, some out of order), messages and
// gap records, the position read from the end is the one a read from the
// start gives.
func FuzzLastPositionReadsBackwardsWhatAForwardReadGives(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 3, 3, 0, 0, 0, 1})
	f.Add([]byte{9, 1, 9, 2, 200, 14, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		path := filepath.Join(t.TempDir(), "j.ndjson")
		var buf bytes.Buffer
		for i, op := range script {
			r := Record{Seq: int64(i + 1), Time: t0, Stream: StreamStdout}
			c := cursor(int(op >> 3)) // cursors repeat and go back: later records are not always later cursors
			switch op % 8 {
			case 0:
				r.Cursor = c
			case 1:
				r.Stream, r.Cursor = StreamStderr, c
			case 2:
				r.Stream = StreamStderr // no cursor
			case 3:
				r.Cursor, r.Valid, r.Type = c, true, "progress-update"
				r.Message = []byte(`{"type":"progress-update","payload":{"storyId":"US-001","status":"in_progress","output":"\"stream\":\"stderr\""}}`)
			case 4:
				r.Stream, r.Omitted = StreamDaemon, &Omission{Lines: 1, Stdout: c}
			case 5:
				r.Stream, r.Omitted = StreamDaemon, &Omission{Lines: 1, Stderr: c}
			case 6:
				r.Stream, r.Omitted = StreamDaemon, &Omission{}
			case 7:
				r.Cursor = c
				r.SetRaw([]byte(`"omitted":{} "stream":"stderr" "cursor":"",`))
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(append(b, '\n'))
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		want, wantCapped := forwardPosition(t, path)
		got, capped, err := lastPosition(path)
		if err != nil || got != want || capped != wantCapped {
			t.Fatalf("from the end: %+v capped=%v (%v); from the start: %+v capped=%v", got, capped, err, want, wantCapped)
		}
	})
}
