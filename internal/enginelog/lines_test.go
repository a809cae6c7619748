package enginelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// fakeLog is an engine log with json-file semantics: entries in write
// order, Since inclusive, every piece of a split line carrying the line's
// timestamp. Each open runs a hook first (the script: status changes,
// appended entries) and may break the stream after some frames.
type fakeLog struct {
	mu      sync.Mutex
	entries []fakeEntry
	status  string // "" = removed
	opens   int
	hook    func(open int, f *fakeLog)
	breakAt map[int]int // open number -> frames before the stream breaks
}

type fakeEntry struct {
	s    engine.Stream
	ts   time.Time
	text string
}

func (f *fakeLog) add(s engine.Stream, ns int, text string) {
	f.entries = append(f.entries, fakeEntry{s, at(ns), text})
}

type brokenReader struct{ r io.Reader }

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (f *fakeLog) open(_ context.Context, since time.Time, tail int) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	if f.hook != nil {
		f.hook(f.opens, f)
	}
	if f.status == "" {
		return nil, fmt.Errorf("open logs: %w", engine.ErrNotFound)
	}
	var sel []fakeEntry
	for _, e := range f.entries {
		if !e.ts.Before(since) {
			sel = append(sel, e)
		}
	}
	if tail >= 0 && len(sel) > tail {
		sel = sel[len(sel)-tail:]
	}
	var buf bytes.Buffer
	limit, breaks := f.breakAt[f.opens]
	for n, e := range sel {
		if breaks && n == limit {
			return io.NopCloser(&brokenReader{&buf}), nil
		}
		buf.Write(frame(e.s, e.ts, e.text))
	}
	return io.NopCloser(&buf), nil
}

func (f *fakeLog) inspect(context.Context) (engine.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status == "" {
		return engine.Info{}, fmt.Errorf("inspect: %w", engine.ErrNotFound)
	}
	return engine.Info{Status: f.status, Running: f.status == "running"}, nil
}

func readFake(t *testing.T, f *fakeLog, after logcursor.Position, follow bool) []engine.Line {
	t.Helper()
	return readFakeTail(t, f, after, follow, 0)
}

// readFakeTail is readFake with the first snapshot asking for tail entries
// (0: the default).
func readFakeTail(t *testing.T, f *fakeLog, after logcursor.Position, follow bool, tail int) []engine.Line {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make(chan engine.Line)
	r := &lineReader{id: "fake", after: after, out: out, tail: tail,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), open: f.open, inspect: f.inspect}
	go func() {
		defer close(out)
		r.run(ctx, follow)
	}()
	var got []engine.Line
	for l := range out {
		got = append(got, l)
	}
	if ctx.Err() != nil {
		t.Fatal("reader did not end")
	}
	return got
}

// script: nothing before the start; output in pieces while running, with
// streams breaking mid-line; more output after the follow stream ended and
// the container exited, including a line sharing a timestamp and a last
// line without a newline.
func scriptedLog() *fakeLog {
	return &fakeLog{
		status:  "created",
		breakAt: map[int]int{2: 2, 3: 4},
		hook: func(open int, f *fakeLog) {
			switch open {
			case 2:
				f.status = "running"
				f.add(engine.Stdout, 1, "a\n")
				f.add(engine.Stdout, 2, "bb")
				f.add(engine.Stdout, 2, "bb")
				f.add(engine.Stdout, 2, "b\n")
				f.add(engine.Stdout, 2, "c\n")
				f.add(engine.Stderr, 3, "d\n")
			case 3:
				f.add(engine.Stdout, 4, "e\n")
			case 4:
				f.status = "exited"
				f.add(engine.Stdout, 4, "f\n")
			case 5:
				// Logged by the other stream's goroutine with an older
				// timestamp, but written after the follow stream ended.
				f.add(engine.Stderr, 3, "late\n")
				f.add(engine.Stdout, 5, "g")
			}
		},
	}
}

func TestLineReaderDeliversEachLineOnceAcrossBreaksAndReopens(t *testing.T) {
	got := readFake(t, scriptedLog(), logcursor.Position{}, true)
	want := "stdout@1#0:a stdout@2#0:bbbbb stdout@2#1:c stderr@3#0:d stdout@4#0:e stdout@4#1:f stderr@3#1:late stdout@5#0:g"
	if s := show(got); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
}

func TestLineReaderResumesStrictlyAfterTheCursor(t *testing.T) {
	tests := []struct {
		name  string
		after logcursor.Position
		want  string
	}{
		{"after the first of two lines sharing a timestamp", stdoutAt(2, 0), "stdout@2#1:c stderr@3#0:d stdout@4#0:e stdout@4#1:f stderr@3#1:late stdout@5#0:g"},
		{"after the second of them", stdoutAt(2, 1), "stderr@3#0:d stdout@4#0:e stdout@4#1:f stderr@3#1:late stdout@5#0:g"},
		{"after the last line of each stream", logcursor.Position{Stdout: logcursor.Cursor{Time: at(5)}, Stderr: logcursor.Cursor{Time: at(3), Seq: 1}}, ""},
		{"stderr resumes after its own cursor, not stdout's", logcursor.Position{Stdout: logcursor.Cursor{Time: at(2), Seq: 1}, Stderr: logcursor.Cursor{Time: at(3)}}, "stdout@4#0:e stdout@4#1:f stderr@3#1:late stdout@5#0:g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := scriptedLog()
			// Replay the whole script first, as if an earlier reader had
			// run, then read again from the cursor without following.
			readFake(t, f, logcursor.Position{}, true)
			f.hook, f.breakAt = nil, nil
			if s := show(readFake(t, f, tt.after, false)); s != tt.want {
				t.Fatalf("got  %s\nwant %s", s, tt.want)
			}
		})
	}
}

func TestLineReaderSnapshotOfARunningContainerHoldsBackAnOpenLine(t *testing.T) {
	f := &fakeLog{status: "running"}
	f.add(engine.Stdout, 1, "done\n")
	f.add(engine.Stdout, 2, "ha")
	if s := show(readFake(t, f, logcursor.Position{}, false)); s != "stdout@1#0:done" {
		t.Fatalf("got %s", s)
	}
	f.status = "exited"
	if s := show(readFake(t, f, stdoutAt(1, 0), false)); s != "stdout@2#0:ha" {
		t.Fatalf("after the exit got %s", s)
	}
}

func TestLineReaderReportsARemovedContainer(t *testing.T) {
	f := &fakeLog{status: "running", hook: func(open int, f *fakeLog) {
		if open == 2 {
			f.status = ""
		}
	}}
	f.add(engine.Stdout, 1, "a\n")
	got := readFake(t, f, logcursor.Position{}, true)
	if len(got) != 2 || string(got[0].Data) != "a" || !got[1].Cursor.IsZero() || !errors.Is(got[1].Err, engine.ErrNotFound) {
		t.Fatalf("got %s / last err %v", show(got), got[len(got)-1].Err)
	}
	if !strings.Contains(got[1].Err.Error(), "removed") {
		t.Fatalf("error %q does not say the container was removed", got[1].Err)
	}
}

func stdoutAt(ns, seq int) logcursor.Position {
	return logcursor.Position{Stdout: logcursor.Cursor{Time: at(ns), Seq: seq}}
}

// A snapshot asks for the log's tail; one too short to reach back past the
// last delivered line of every stream with new lines is asked again for
// more, so a cut through a long line's pieces or a burst never shows.
func TestLineReaderGrowsATailThatDoesNotReachBack(t *testing.T) {
	tests := []struct {
		name  string
		log   func(f *fakeLog)
		after logcursor.Position
		tail  int
		want  string
	}{
		{
			name: "a long line cut by the tail is read whole",
			log: func(f *fakeLog) {
				f.add(engine.Stdout, 1, "old\n")
				f.add(engine.Stdout, 2, "aa")
				f.add(engine.Stdout, 2, "bb")
				f.add(engine.Stdout, 2, "cc\n")
				f.add(engine.Stdout, 3, "new\n")
			},
			after: stdoutAt(1, 0),
			tail:  2,
			want:  "stdout@2#0:aabbcc stdout@3#0:new",
		},
		{
			name: "a quiet stream's new line far back in the log is not missed",
			log: func(f *fakeLog) {
				f.add(engine.Stderr, 1, "e0\n")
				f.add(engine.Stderr, 2, "e1\n")
				for i := 3; i < 40; i++ {
					f.add(engine.Stdout, i, fmt.Sprintf("o%d\n", i))
				}
			},
			after: logcursor.Position{Stdout: logcursor.Cursor{Time: at(37)}, Stderr: logcursor.Cursor{Time: at(1)}},
			tail:  2,
			want:  "stderr@2#0:e1 stdout@38#0:o38 stdout@39#0:o39",
		},
		{
			name: "a stream with no cursor yet is read from the start",
			log: func(f *fakeLog) {
				f.add(engine.Stderr, 1, "first\n")
				for i := 2; i < 20; i++ {
					f.add(engine.Stdout, i, fmt.Sprintf("o%d\n", i))
				}
			},
			after: logcursor.Position{Stdout: logcursor.Cursor{Time: at(18)}},
			tail:  1,
			want:  "stderr@1#0:first stdout@19#0:o19",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeLog{status: "exited"}
			tt.log(f)
			if s := show(readFakeTail(t, f, tt.after, false, tt.tail)); s != tt.want {
				t.Fatalf("got  %s\nwant %s", s, tt.want)
			}
		})
	}
}
