package container

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
			back, err := ParseCursor(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if back.Compare(tt.c) != 0 {
				t.Fatalf("ParseCursor(%q) = %v, want %v", tt.want, back, tt.c)
			}
			b, _ := json.Marshal(struct{ C Cursor }{tt.c})
			var v struct{ C Cursor }
			if err := json.Unmarshal(b, &v); err != nil || v.C.Compare(tt.c) != 0 {
				t.Fatalf("JSON round trip %s -> %v, %v", b, v.C, err)
			}
		})
	}
}

func TestParseCursorRejectsMalformed(t *testing.T) {
	for _, s := range []string{
		"2026-11-22T15:42:38Z",     // no seq
		"2026-11-22T15:42:38Z#",    // empty seq
		"2026-11-22T15:42:38Z#-1",  // negative
		"2026-11-22T15:42:38Z#+1",  // sign
		"2026-11-22T15:42:38Z#01",  // leading zero: one spelling per cursor
		"2026-11-22 15:42:38Z#0",   // not RFC 3339
		"yesterday#0",              // not a time
		"0001-01-01T00:00:00Z#0",   // zero cursor must be ""
		"2026-11-22T15:42:38Z#1#2", // two separators
	} {
		if c, err := ParseCursor(s); err == nil {
			t.Errorf("ParseCursor(%q) = %v, want error", s, c)
		}
	}
}

func TestCursorOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	a, b, c := Cursor{Time: t0}, Cursor{Time: t0, Seq: 1}, Cursor{Time: t0.Add(1)}
	if !b.After(a) || !c.After(b) || a.After(a) || a.After(c) {
		t.Fatalf("order wrong: a=%v b=%v c=%v", a, b, c)
	}
	if !(Cursor{}).IsZero() || a.IsZero() {
		t.Fatal("IsZero wrong")
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add("")
	f.Add("2026-11-22T15:42:38.396502743Z#0")
	f.Add("2026-11-22T15:42:38+02:00#17")
	f.Add("2026-11-22T15:42:38Z#99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		again, err := ParseCursor(c.String())
		if err != nil {
			t.Fatalf("ParseCursor(%q) ok but its String %q does not parse: %v", s, c.String(), err)
		}
		if again.Compare(c) != 0 || again.String() != c.String() {
			t.Fatalf("round trip %q -> %v -> %v", s, c, again)
		}
	})
}
