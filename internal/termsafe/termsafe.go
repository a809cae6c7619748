package termsafe

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// neutral reports whether r may reach a terminal as it is.
func neutral(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return false // bidi embeddings, overrides, isolates and marks reorder what is shown
	}
	return true
}

// String returns s with every character a terminal would act on replaced
// (see the package doc). Text without any is returned as it is.
func String(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !neutral(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	appendClean(&b, []byte(s))
	return b.String()
}

// appendClean writes p, cleaned, to b. p holds whole runes (or bytes that
// will never become one).
func appendClean(b *strings.Builder, p []byte) {
	b.Grow(len(p))
	for len(p) > 0 {
		// Printable ASCII, newline and tab pass as they are: copied in
		// runs, since a status answer of hundreds of containers is almost
		// all of them and a rune at a time was most of its printing.
		if k := asciiRun(p); k > 0 {
			b.Write(p[:k])
			p = p[k:]
			continue
		}
		r, n := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteRune(utf8.RuneError)
		case neutral(r):
			b.Write(p[:n])
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
		p = p[n:]
	}
}

// asciiRun is the length of p's leading bytes that are neutral ASCII.
func asciiRun(p []byte) int {
	for i, c := range p {
		if (c < 0x20 || c >= 0x7f) && c != '\n' && c != '\t' {
			return i
		}
	}
	return len(p)
}

// Writer cleans everything written through it (as String does) before it
// reaches the underlying writer. A rune split across two writes is held back
// until its end arrives; Flush writes what is held. Writes are serialised.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte // the start of a rune cut by the end of the last write
}

// NewWriter wraps w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Unwrap is the underlying writer.
func (tw *Writer) Unwrap() io.Writer { return tw.w }

// Write cleans p and writes it; it reports len(p) on success.
func (tw *Writer) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	data := p
	if len(tw.pending) > 0 {
		data = append(tw.pending, p...)
		tw.pending = nil
	}
	// Hold back an incomplete rune at the end (at most 3 bytes).
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	tw.pending = append([]byte(nil), data[cut:]...)
	var b strings.Builder
	appendClean(&b, data[:cut])
	if _, err := io.WriteString(tw.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held back of an incomplete rune (as U+FFFD: nothing
// will complete it now).
func (tw *Writer) Flush() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.flushLocked()
}

func (tw *Writer) flushLocked() error {
	if len(tw.pending) == 0 {
		return nil
	}
	var b strings.Builder
	appendClean(&b, tw.pending)
	tw.pending = nil
	_, err := io.WriteString(tw.w, b.String())
	return err
}

// WriteControl writes s as it is: for the caller's own terminal control
// (clear the screen, move the cursor), never for text from elsewhere.
func (tw *Writer) WriteControl(s string) error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if err := tw.flushLocked(); err != nil {
		return err
	}
	_, err := io.WriteString(tw.w, s)
	return err
}

// Line returns s for a display that shows text as text on one line (a
// table cell, an HTML element's textContent): bytes that are not UTF-8
// become U+FFFD, tab, newline and carriage return a space, every other
// character String would escape is dropped (a page has no use for its
// escape), and at most max runes are kept, then "…".
func Line(s string, max int) string {
	var b strings.Builder
	n := 0
	for p := []byte(s); len(p) > 0; {
		r, size := utf8.DecodeRune(p)
		p = p[size:]
		switch {
		case r == utf8.RuneError && size <= 1:
		case r == '\t' || r == '\n' || r == '\r':
			r = ' '
		case !neutral(r):
			continue
		}
		if n == max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
