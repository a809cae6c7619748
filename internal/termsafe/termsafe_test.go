package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringNeutralisesEveryControl(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text is kept", "héllo\tworld\n", "héllo\tworld\n"},
		{"CSI clear screen", "\x1b[2J\x1b[H", `\u001b[2J\u001b[H`},
		{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\u001b]52;c;cm0gLXJmIH4=\u0007`},
		{"carriage return", "ok\rSwarm OK", `ok\u000dSwarm OK`},
		{"DEL", "a\x7fb", `a\u007fb`},
		{"C1 CSI as UTF-8", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 as a raw byte", "a\x9b2Jb", "a\ufffd2Jb"},
		{"bidi override", "abc\u202edef", `abc\u202edef`},
		{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestWriterKeepsJSONExact: JSON through the writer decodes to the same
// value, whatever the strings hold.
func TestWriterKeepsJSONExact(t *testing.T) {
	v := map[string]string{"line": "\x1b]0;title\x07 \u009b31m \u202e \x7f \r\n done"}
	doc, _ := json.Marshal(v)
	var buf bytes.Buffer
	w := NewWriter(&buf)
	// One byte at a time: runes split across writes.
	for i := range doc {
		w.Write(doc[i : i+1])
	}
	w.Flush()
	var got map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got["line"] != v["line"] {
		t.Fatalf("decoded %q (%v) from %s", got["line"], err, buf.Bytes())
	}
	for _, r := range buf.String() {
		if !neutral(r) {
			t.Fatalf("%U reached the terminal: %q", r, buf.String())
		}
	}
}

func TestWriterSplitRunesAndControl(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	c1 := []byte("\u009b")
	w.Write([]byte("x" + string(c1[:1])))
	w.Write(c1[1:])
	w.WriteControl("\x1b[J")
	w.Write([]byte("é"[:1]))
	w.Flush()
	if want := `x\u009b` + "\x1b[J\ufffd"; buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

// FuzzString: nothing a terminal acts on survives, the result is UTF-8, and
// clean text is unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2J", "\u009b", "\x9b", "\u202e", "a\r\n", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if !utf8.ValidString(got) {
			t.Fatalf("not UTF-8: %q", got)
		}
		for _, r := range got {
			if !neutral(r) {
				t.Fatalf("%U survives in %q", r, got)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !neutral(r) }) && got != s {
			t.Fatalf("clean text changed: %q -> %q", s, got)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		half := len(s) / 2
		w.Write([]byte(s[:half]))
		w.Write([]byte(s[half:]))
		w.Flush()
		if buf.String() != got {
			t.Fatalf("writer %q != String %q", buf.String(), got)
		}
	})
}

func TestLineDropsWhatStringEscapesAndBounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"a\x1b[31mred\x07", 10, "a[31mred"},
		{"c1\u009b2J del\x7f", 20, "c12J del"},
		{"tab\there\r\nnl", 20, "tab here  nl"},
		{"rtl\u202eoverride\u2066\u200f\u061c", 20, "rtloverride"},
		{"bad \xff\xfe utf8", 20, "bad \uFFFD\uFFFD utf8"},
		{"abcdef", 3, "abc…"},
		{"abc", 3, "abc"},
	} {
		if got := Line(c.in, c.max); got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	// Every character String escapes is one Line drops, and no other.
	for r := rune(0); r <= 0x3000; r++ {
		if r == '\t' || r == '\n' || r == '\r' {
			continue
		}
		s := string(r)
		escaped := String(s) != s
		dropped := Line(s, 1) == ""
		if escaped != dropped {
			t.Errorf("%U: String escapes it %v, Line drops it %v", r, escaped, dropped)
		}
	}
}
