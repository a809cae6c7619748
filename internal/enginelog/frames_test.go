package enginelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

var t0 = time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)

// engineTimeLayout is the engine's fixed-width log timestamp
// (jsonmessage.RFC3339NanoFixed).
const engineTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// frame renders one engine log frame: header, "<timestamp> ", text.
func frame(s engine.Stream, ts time.Time, text string) []byte {
	p := ts.Format(engineTimeLayout) + " " + text
	var b bytes.Buffer
	b.Write([]byte{byte(s), 0, 0, 0})
	binary.Write(&b, binary.BigEndian, uint32(len(p)))
	b.WriteString(p)
	return b.Bytes()
}

func at(ns int) time.Time { return t0.Add(time.Duration(ns)) }

// split runs the splitter over the frames and flushes, like a final pass.
func split(t *testing.T, max int, frames ...[]byte) ([]engine.Line, error) {
	t.Helper()
	var got []engine.Line
	fs := newFrameSplitter(max, func(l engine.Line) bool { got = append(got, l); return true })
	err := fs.readFrom(bytes.NewReader(bytes.Join(frames, nil)))
	if err == nil {
		fs.flush()
	}
	return got, err
}

// show renders lines compactly: "stream@ns#seq:data" or "...:ERR(size)".
func show(ls []engine.Line) string {
	var parts []string
	for _, l := range ls {
		body := string(l.Data)
		if l.Err != nil {
			body = fmt.Sprintf("ERR(%d)", l.Size)
		}
		parts = append(parts, fmt.Sprintf("%s@%d#%d:%s", l.Stream, l.Cursor.Time.Sub(t0), l.Cursor.Seq, body))
	}
	return strings.Join(parts, " ")
}

// frameCase is one case of TestFrameSplitter: frames split with a line
// limit of max (0: engine.MaxLineBytes) give the lines want shows.
type frameCase struct {
	name   string
	max    int
	frames [][]byte
	want   string
}

func TestFrameSplitter(t *testing.T) {
	for _, tt := range append(frameOrderCases(), frameLineCases()...) {
		t.Run(tt.name, func(t *testing.T) { checkFrameSplit(t, tt) })
	}
}

// frameOrderCases are TestFrameSplitter's cases of order, numbering,
// repeated entries and partial entries.
func frameOrderCases() []frameCase {
	return []frameCase{
		{
			name:   "one frame per line keeps order and streams",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stderr, at(2), "e\n"), frame(engine.Stdout, at(3), "b\n")},
			want:   "stdout@1#0:a stderr@2#0:e stdout@3#0:b",
		},
		{
			name:   "lines sharing a timestamp are numbered in order per stream",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stdout, at(1), "b\n"), frame(engine.Stderr, at(1), "c\n"), frame(engine.Stdout, at(2), "d\n")},
			want:   "stdout@1#0:a stdout@1#1:b stderr@1#0:c stdout@2#0:d",
		},
		{
			name:   "a log entry the engine repeats is dropped before it is numbered",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stdout, at(1), "a\n"), frame(engine.Stdout, at(1), "b\n"), frame(engine.Stdout, at(1), "b\n"), frame(engine.Stdout, at(2), "c\n")},
			want:   "stdout@1#0:a stdout@1#1:b stdout@2#0:c",
		},
		{
			name:   "the same text at another time or on the other stream is a line",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stderr, at(1), "a\n"), frame(engine.Stdout, at(2), "a\n"), frame(engine.Stdout, at(2), "b\n"), frame(engine.Stdout, at(2), "a\n")},
			want:   "stdout@1#0:a stderr@1#0:a stdout@2#0:a stdout@2#1:b stdout@2#2:a",
		},
		{
			name: "partial entries are joined without their timestamps",
			max:  64,
			frames: [][]byte{
				frame(engine.Stdout, at(5), "hello "), frame(engine.Stdout, at(5), "big "), frame(engine.Stdout, at(5), "world\n"),
			},
			want: "stdout@5#0:hello big world",
		},
		{
			name: "stderr line between partial stdout pieces keeps both intact",
			max:  64,
			frames: [][]byte{
				frame(engine.Stdout, at(5), "left "), frame(engine.Stderr, at(6), "err\n"), frame(engine.Stdout, at(5), "right\n"),
			},
			want: "stderr@6#0:err stdout@5#0:left right",
		},
	}
}

// frameLineCases are TestFrameSplitter's cases of line lengths, several
// lines in a frame and the stream's end.
func frameLineCases() []frameCase {
	big := strings.Repeat("x", 16*1024)
	return []frameCase{
		{
			name: "oversized line between two good ones is reported and skipped",
			max:  engine.MaxLineBytes,
			frames: [][]byte{
				frame(engine.Stdout, at(1), "before\n"),
				frame(engine.Stdout, at(2), big), frame(engine.Stdout, at(2), big), frame(engine.Stdout, at(2), big),
				frame(engine.Stdout, at(2), big), frame(engine.Stdout, at(2), big), frame(engine.Stdout, at(2), "tail\n"),
				frame(engine.Stdout, at(3), "after\n"),
			},
			want: fmt.Sprintf("stdout@1#0:before stdout@2#0:ERR(%d) stdout@3#0:after", 5*16*1024+4),
		},
		{
			name:   "line of exactly the limit is kept",
			max:    4,
			frames: [][]byte{frame(engine.Stdout, at(1), "abcd\n"), frame(engine.Stdout, at(2), "abcde\n")},
			want:   "stdout@1#0:abcd stdout@2#0:ERR(5)",
		},
		{
			name:   "several lines in one frame share its timestamp",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\nb\n\nc\n")},
			want:   "stdout@1#0:a stdout@1#1:b stdout@1#2: stdout@1#3:c",
		},
		{
			name:   "last line without newline is flushed at the end",
			frames: [][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stdout, at(2), "no newline")},
			want:   "stdout@1#0:a stdout@2#0:no newline",
		},
		{
			name:   "empty stream gives no lines",
			frames: nil,
			want:   "",
		},
	}
}

func checkFrameSplit(t *testing.T, tt frameCase) {
	max := tt.max
	if max == 0 {
		max = engine.MaxLineBytes
	}
	got, err := split(t, max, tt.frames...)
	if err != nil {
		t.Fatal(err)
	}
	if s := show(got); s != tt.want {
		t.Fatalf("got  %s\nwant %s", s, tt.want)
	}
	for _, l := range got {
		if l.Err != nil && !errors.Is(l.Err, engine.ErrLineTooLong) {
			t.Fatalf("unexpected line error %v", l.Err)
		}
	}
}

func TestFrameSplitterStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
	}{
		{"engine error frame ends the stream with its message", append(frame(engine.Stdout, at(1), "a\n"), append([]byte{3, 0, 0, 0, 0, 0, 0, 4}, "boom"...)...)},
		{"frame without a timestamp is an error", append([]byte{1, 0, 0, 0, 0, 0, 0, 3}, "hi\n"...)},
		{"truncated frame is an error", frame(engine.Stdout, at(1), "abc\n")[:20]},
		{"unknown stream id is an error", append([]byte{7, 0, 0, 0, 0, 0, 0, 1}, 'x')},
		{"truncated header is an error", []byte{1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFrameSplitter(engine.MaxLineBytes, func(engine.Line) bool { return true })
			if err := fs.readFrom(bytes.NewReader(tt.stream)); err == nil {
				t.Fatal("readFrom = nil, want an error")
			}
		})
	}
}

func TestFrameSplitterKeepsOpenLinePending(t *testing.T) {
	// A stream that breaks in the middle of a line must not emit half a
	// line: the reader re-reads it whole from the cursor.
	var got []engine.Line
	fs := newFrameSplitter(engine.MaxLineBytes, func(l engine.Line) bool { got = append(got, l); return true })
	if err := fs.readFrom(bytes.NewReader(append(frame(engine.Stdout, at(1), "done\n"), frame(engine.Stdout, at(2), "half")...))); err != nil {
		t.Fatal(err)
	}
	if s := show(got); s != "stdout@1#0:done" {
		t.Fatalf("got %s", s)
	}
	if n := fs.pendingBytes(); n != len("half") {
		t.Fatalf("pendingBytes = %d, want %d", n, len("half"))
	}
}

func FuzzFrameSplitter(f *testing.F) {
	f.Add(bytes.Join([][]byte{frame(engine.Stdout, at(1), "a\n"), frame(engine.Stderr, at(1), "b\n")}, nil), 8)
	f.Add(bytes.Join([][]byte{frame(engine.Stdout, at(1), "abc"), frame(engine.Stdout, at(1), "def\n"), frame(engine.Stdout, at(2), "tail")}, nil), 4)
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, 16)
	f.Add(append([]byte{3, 0, 0, 0, 0, 0, 0, 2}, "no"...), 16)
	f.Fuzz(func(t *testing.T, stream []byte, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		var last [3]logcursor.Cursor
		fs := newFrameSplitter(max, func(l engine.Line) bool {
			if l.Err == nil {
				if len(l.Data) > max || bytes.IndexByte(l.Data, '\n') >= 0 || len(l.Data) != l.Size {
					t.Fatalf("bad line %q size %d (max %d)", l.Data, l.Size, max)
				}
			} else if !errors.Is(l.Err, engine.ErrLineTooLong) || l.Size <= max || l.Data != nil {
				t.Fatalf("bad error line %+v", l)
			}
			if l.Cursor == last[l.Stream] && !l.Cursor.IsZero() {
				t.Fatalf("two %s lines with cursor %v", l.Stream, l.Cursor)
			}
			last[l.Stream] = l.Cursor
			return true
		})
		if fs.readFrom(bytes.NewReader(stream)) == nil {
			fs.flush()
		}
	})
}
