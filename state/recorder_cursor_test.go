package state

import "testing"

func TestCmpCursorOrdersTheContainerPackagesCursors(t *testing.T) {
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
		{"unparsable is never dropped", "garbage", "2026-11-22T15:42:38Z", 1},
		{"bad seq is never dropped", "2026-11-22T15:42:38Z#x", "2026-11-22T15:42:38Z", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := cmpCursor(c.a, c.b); got != c.want {
				t.Fatalf("cmpCursor(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
			}
		})
	}
}
