package logcursor

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// timeLayout is the engine's own fixed-width timestamp layout
// (jsonmessage.RFC3339NanoFixed), always in UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Cursor is a position in one stream of a container's output: the engine's
// timestamp of a line plus its index among the lines of that stream sharing
// that exact timestamp (a coarse clock can put several lines in one tick).
// Resuming after (T, k) skips every line with time < T and the first k+1
// lines with time == T.
type Cursor struct {
	Time time.Time
	Seq  int
}

// IsZero reports whether c is the zero cursor (the start of the output).
func (c Cursor) IsZero() bool { return c.Time.IsZero() && c.Seq == 0 }

// Compare returns -1, 0 or +1 as c is before, equal to or after o.
func (c Cursor) Compare(o Cursor) int {
	if r := c.Time.Compare(o.Time); r != 0 {
		return r
	}
	switch {
	case c.Seq < o.Seq:
		return -1
	case c.Seq > o.Seq:
		return 1
	}
	return 0
}

// After reports whether c comes strictly after o.
func (c Cursor) After(o Cursor) bool { return c.Compare(o) > 0 }

// String renders the cursor for storage ("" for the zero cursor), e.g.
// "2026-11-22T15:42:38.396502743Z#2". Parse reverses it.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return c.Time.UTC().Format(timeLayout) + "#" + strconv.Itoa(c.Seq)
}

// MarshalText implements encoding.TextMarshaler (journals store cursors as
// JSON strings).
func (c Cursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Cursor) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// Parse parses String's output; "" is the zero cursor, and a time without
// "#<seq>" has seq 0.
func Parse(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	ts, seq, hasSeq := strings.Cut(s, "#")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Cursor{}, fmt.Errorf("parse cursor %q: want <RFC 3339 time>[#<seq>]: %w", s, err)
	}
	n := 0
	if hasSeq {
		n, err = strconv.Atoi(seq)
		if err != nil || n < 0 || seq[0] == '+' || (len(seq) > 1 && seq[0] == '0') {
			return Cursor{}, fmt.Errorf("parse cursor %q: seq must be a non-negative decimal integer without leading zeros", s)
		}
	}
	c := Cursor{Time: t.UTC(), Seq: n}
	if c.IsZero() {
		return Cursor{}, fmt.Errorf("parse cursor %q: zero time is written as the empty string", s)
	}
	return c, nil
}

// Position is where a reader stands in a container's output: the cursor of
// the last line taken from each stream (zero: none yet). The engine writes
// stdout and stderr from two goroutines, so their lines are ordered only
// approximately against each other; within one stream the order is exact,
// which is why each stream has its own cursor.
type Position struct {
	Stdout Cursor
	Stderr Cursor
}
