package acpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		name  string
		in    string
		max   int
		lines []string // "ERR" marks an oversized line
	}{
		{"empty input yields EOF", "", 10, nil},
		{"last line without newline is returned", "a\nb", 10, []string{"a", "b"}},
		{"CRLF is stripped", "a\r\nb\r\n", 10, []string{"a", "b"}},
		{"empty lines are lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"line of exactly max bytes is kept", "0123456789\n", 10, []string{"0123456789"}},
		{"line of max plus one byte is reported and skipped", "0123456789a\nok\n", 10, []string{"ERR", "ok"}},
		{"oversized last line without newline is reported", "ok\n" + long, 10, []string{"ok", "ERR"}},
		{"oversized lines larger than the buffer are skipped", strings.Repeat("y", 200000) + "\nok\n" + strings.Repeat("z", 70000) + "\n", 65536, []string{"ERR", "ok", "ERR"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				lr := NewLineReader(r, tc.max)
				var got []string
				for {
					l, err := lr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if errors.Is(err, ErrLineTooLong) {
						got = append(got, "ERR")
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, string(l))
				}
				if strings.Join(got, "|") != strings.Join(tc.lines, "|") || len(got) != len(tc.lines) {
					t.Fatalf("got %q, want %q", got, tc.lines)
				}
			}
		})
	}
}

func TestLineReaderReportsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	lr := NewLineReader(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), 10)
	if l, err := lr.Next(); err != nil || string(l) != "a" {
		t.Fatalf("first line: %q %v", l, err)
	}
	if _, err := lr.Next(); !errors.Is(err, boom) {
		t.Fatalf("want read error, got %v", err)
	}
}

func TestReaderKeepsGoingPastBadLines(t *testing.T) {
	good, _ := json.Marshal(base(TypeProgressUpdate))
	bad := `{"type":"progress-update"}`
	in := string(good) + "\n" + strings.Repeat("x", MaxLineBytes+5) + "\n" + "not json\n" + bad + "\n" + string(good)
	r := NewReader(strings.NewReader(in))
	var errs []bool
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Number != len(errs)+1 {
			t.Fatalf("line number %d, want %d", l.Number, len(errs)+1)
		}
		errs = append(errs, l.Err != nil)
		if l.Number == 2 && !errors.Is(l.Err, ErrLineTooLong) {
			t.Errorf("line 2: %v, want ErrLineTooLong", l.Err)
		}
		if l.Number == 4 && l.Msg.Type != TypeProgressUpdate {
			t.Errorf("line 4: invalid message should keep its type, got %q", l.Msg.Type)
		}
	}
	want := []bool{false, true, true, true, false}
	if len(errs) != len(want) {
		t.Fatalf("got %v, want %v", errs, want)
	}
	for i := range want {
		if errs[i] != want[i] {
			t.Fatalf("got %v, want %v", errs, want)
		}
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	ok := NewMessage(TypeProgressUpdate, testSwarmID, "c1", &ProgressUpdate{StoryID: "US-001", Status: StoryCompleted, Output: "<done> & dusted"})
	if err := w.Write(ok); err != nil {
		t.Fatal(err)
	}
	bad := NewMessage(TypeProgressUpdate, testSwarmID, "c1", &ProgressUpdate{StoryID: "x", Status: StoryCompleted})
	if err := w.Write(bad); err == nil {
		t.Fatal("invalid message written")
	}
	huge := NewMessage(TypeCompletion, testSwarmID, "c1", &Completion{Status: "failed", Errors: CapErrors(repeat(60, strings.Repeat("\x01", 600)))})
	if err := w.Write(huge); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("over-long encoding: %v, want ErrLineTooLong", err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want exactly one line, got %q", out)
	}
	if !strings.Contains(out, "<done> & dusted") {
		t.Errorf("HTML escaping should be off: %s", out)
	}
	m, err := Parse([]byte(out))
	if err != nil || m.Payload.(*ProgressUpdate).Output != "<done> & dusted" {
		t.Fatalf("written line does not parse back: %v", err)
	}
}

func repeat(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestWriterIsSafeForConcurrentUse(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				m := NewMessage(TypeProgressUpdate, testSwarmID, "c", &ProgressUpdate{StoryID: "US-001", Status: StoryInProgress, Output: strings.Repeat(string(rune('a'+g)), 1500)})
				if err := w.Write(m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r := NewReader(&buf)
	n := 0
	for {
		l, err := r.Next()
		if err != nil {
			break
		}
		if l.Err != nil {
			t.Fatalf("line %d torn: %v", l.Number, l.Err)
		}
		n++
	}
	if n != 400 {
		t.Fatalf("read %d lines, want 400", n)
	}
}

func TestNewMessageTimestampIsValidUTC(t *testing.T) {
	m := NewMessage(TypeError, testSwarmID, "c", &ErrorPayload{Code: CodeAgentCrash, Message: "x"})
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(m.Timestamp, "Z") {
		t.Errorf("timestamp %q is not UTC", m.Timestamp)
	}
}

func TestTruncateOutput(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		wantRunes int
	}{
		{"short text is unchanged", "héllo", 5},
		{"2000 chars are unchanged", strings.Repeat("a", 2000), 2000},
		{"2001 chars are cut to 2000", strings.Repeat("a", 2001), 2000},
		{"multibyte text is cut on a character boundary", strings.Repeat("日本", 1500), 2000},
		{"emoji text is cut on a character boundary", "x" + strings.Repeat("🚀", 2500), 2000},
		{"invalid UTF-8 is repaired", "a\xffb", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateOutput(tc.in)
			if !utf8.ValidString(got) || utf8.RuneCountInString(got) != tc.wantRunes {
				t.Fatalf("got %d runes (valid=%v), want %d", utf8.RuneCountInString(got), utf8.ValidString(got), tc.wantRunes)
			}
			if !strings.HasPrefix(tc.in, got) && utf8.ValidString(tc.in) {
				t.Errorf("result is not a prefix of the input")
			}
		})
	}
}

func TestCapErrors(t *testing.T) {
	cases := []struct {
		name     string
		in       []string
		wantLen  int
		maxRunes int
	}{
		{"nil becomes an empty list", nil, 0, 0},
		{"50 entries are kept", repeat(50, "e"), 50, 1},
		{"51 entries are cut to 50", repeat(51, "e"), 50, 1},
		{"500-char entry is kept", repeat(1, strings.Repeat("ö", 500)), 1, 500},
		{"501-char entry is cut to 500", repeat(1, strings.Repeat("ö", 501)), 1, 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CapErrors(tc.in)
			if got == nil || len(got) != tc.wantLen {
				t.Fatalf("got %d entries (nil=%v), want %d", len(got), got == nil, tc.wantLen)
			}
			for _, e := range got {
				if n := utf8.RuneCountInString(e); n > tc.maxRunes {
					t.Fatalf("entry of %d runes, want <= %d", n, tc.maxRunes)
				}
			}
		})
	}
}

// FuzzParse feeds arbitrary bytes through the reader and validator: it must
// never panic, every line must be reported, and every valid message must
// survive an encode/decode round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, typ := range []Type{TypeTaskRequest, TypeProgressUpdate, TypeCompletion, TypeError} {
		b, _ := json.Marshal(base(typ))
		f.Add(b)
	}
	f.Add([]byte("{}\n[1]\n\xff\n{\"type\":\"error\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		lines := 0
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("reader error on in-memory input: %v", err)
			}
			lines++
			if l.Number != lines {
				t.Fatalf("line number %d, want %d", l.Number, lines)
			}
			if l.Err != nil {
				if len(FieldErrors(l.Err)) == 0 {
					t.Fatalf("error without field errors: %v", l.Err)
				}
				continue
			}
			if err := l.Msg.Validate(); err != nil {
				t.Fatalf("Parse accepted a message Validate rejects: %v", err)
			}
			out, err := Marshal(l.Msg)
			if errors.Is(err, ErrLineTooLong) {
				continue // re-encoding may escape differently and grow past the cap
			}
			if err != nil {
				t.Fatalf("marshal valid message: %v", err)
			}
			back, err := Parse(out)
			if err != nil {
				t.Fatalf("re-parse %s: %v", out, err)
			}
			if !reflect.DeepEqual(back, l.Msg) {
				t.Fatalf("round trip differs:\n%#v\n%#v", l.Msg, back)
			}
		}
		if want := bytes.Count(data, []byte("\n")); len(data) > 0 && data[len(data)-1] != '\n' {
			want++
			if lines != want {
				t.Fatalf("read %d lines, want %d", lines, want)
			}
		} else if lines != want {
			t.Fatalf("read %d lines, want %d", lines, want)
		}
	})
}
