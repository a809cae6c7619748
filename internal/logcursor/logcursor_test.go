package logcursor

import (
	"encoding/json"
	"testing"
	"time"
)

func TestCursorStringRoundTrip(t *testing.T) {
	ts := time.Date(2026, 11, 22, 15, 42, 38, 396502743, time.UTC)
	tests := []struct {
		name string
		c    Cursor
		want string
	}{
		{"zero cursor is the empty string", Cursor{}, ""},
		{"first line of a timestamp", Cursor{Time: ts}, "2026-11-22T15:42:38.396502743Z#0"},
		{"third line sharing a timestamp", Cursor{Time: ts, Seq: 2}, "2026-11-22T15:42:38.396502743Z#2"},
		{"whole second keeps nine digits", Cursor{Time: ts.Truncate(time.Second), Seq: 1}, "2026-11-22T15:42:38.000000000Z#1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Fatalf("String = %q, want %q", got, tt.want)
			}
			back, err := Parse(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if back.Compare(tt.c) != 0 {
				t.Fatalf("Parse(%q) = %v, want %v", tt.want, back, tt.c)
			}
			b, _ := json.Marshal(struct{ C Cursor }{tt.c})
			var v struct{ C Cursor }
			if err := json.Unmarshal(b, &v); err != nil || v.C.Compare(tt.c) != 0 {
				t.Fatalf("JSON round trip %s -> %v, %v", b, v.C, err)
			}
		})
	}
}

// Journals of earlier versions carry cursors without "#seq"; both the
// reader of container output and the journal must accept them as seq 0.
func TestParseTakesACursorWithoutSeqAsSeqZero(t *testing.T) {
	c, err := Parse("2026-11-22T15:42:38.396502743Z")
	if err != nil {
		t.Fatal(err)
	}
	want := Cursor{Time: time.Date(2026, 11, 22, 15, 42, 38, 396502743, time.UTC)}
	if c.Compare(want) != 0 {
		t.Fatalf("got %v, want %v", c, want)
	}
	if c.String() != "2026-11-22T15:42:38.396502743Z#0" {
		t.Fatalf("String %q", c.String())
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, s := range []string{
		"2026-11-22T15:42:38Z#",    // empty seq
		"2026-11-22T15:42:38Z#-1",  // negative
		"2026-11-22T15:42:38Z#+1",  // sign
		"2026-11-22T15:42:38Z#01",  // leading zero: one spelling per cursor
		"2026-11-22 15:42:38Z#0",   // not RFC 3339
		"yesterday#0",              // not a time
		"garbage",                  // not a time
		"0001-01-01T00:00:00Z#0",   // zero cursor must be ""
		"2026-11-22T15:42:38Z#1#2", // two separators
		"2026-11-22T15:42:38Z#x",   // not a number
	} {
		if c, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want error", s, c)
		}
	}
}

func TestCursorOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	cases := []struct {
		name string
		a, b string
		want int
	}{
		{"same time and seq", "2026-11-22T15:42:38.396502743Z#2", "2026-11-22T15:42:38.396502743Z#2", 0},
		{"same time, lower seq", "2026-11-22T15:42:38.396502743Z#1", "2026-11-22T15:42:38.396502743Z#2", -1},
		{"same time, higher seq", "2026-11-22T15:42:38.396502743Z#3", "2026-11-22T15:42:38.396502743Z#2", 1},
		{"no seq means seq 0", "2026-11-22T15:42:38.396502743Z", "2026-11-22T15:42:38.396502743Z#0", 0},
		{"earlier time wins over seq", "2026-11-22T15:42:38.1Z#9", "2026-11-22T15:42:38.2Z#0", -1},
		{"later time", "2026-11-22T15:42:39Z", "2026-11-22T15:42:38.9Z#5", 1},
		{"offsets compare as instants", "2026-11-22T16:42:38+01:00#0", "2026-11-22T15:42:38Z#0", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err1 := Parse(c.a)
			b, err2 := Parse(c.b)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if got := a.Compare(b); got != c.want {
				t.Fatalf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
			}
		})
	}
	a, b := Cursor{Time: t0}, Cursor{Time: t0, Seq: 1}
	if !b.After(a) || a.After(a) || !(Cursor{}).IsZero() || a.IsZero() {
		t.Fatal("After or IsZero wrong")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("")
	f.Add("2026-11-22T15:42:38.396502743Z#0")
	f.Add("2026-11-22T15:42:38+02:00#17")
	f.Add("2026-11-22T15:42:38Z")
	f.Add("2026-11-22T15:42:38Z#99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(c.String())
		if err != nil {
			t.Fatalf("Parse(%q) ok but its String %q does not parse: %v", s, c.String(), err)
		}
		if again.Compare(c) != 0 || again.String() != c.String() {
			t.Fatalf("round trip %q -> %v -> %v", s, c, again)
		}
	})
}
