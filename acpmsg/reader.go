package acpmsg

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// LineReader splits a stream into lines with a hard cap on line length. It is
// built on bufio.Reader rather than bufio.Scanner because a Scanner stops for
// good at the first oversized token; here an oversized line is reported and
// skipped, and reading goes on with the next line.
type LineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewLineReader reads lines of at most max bytes (newline excluded) from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, 32*1024), max: max}
}

// Next returns the next line without its trailing newline ("\r\n" loses the
// "\r" too; the cap counts the "\r"). The slice is the caller's to keep. A line longer than the cap
// yields an error wrapping ErrLineTooLong with the line's length; the line is
// discarded and the next call reads the line after it. At the end of input
// Next returns io.EOF; a final line without a newline is returned first.
// Any other error is the underlying reader's.
func (lr *LineReader) Next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	n := 0 // bytes of the line seen so far, kept or not
	for {
		chunk, err := lr.br.ReadSlice('\n')
		n += len(chunk)
		if len(lr.buf) <= lr.max { // stop copying once over the cap
			lr.buf = append(lr.buf, chunk...)
		}
		switch {
		case err == nil:
			return lr.finish(n, true)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if n == 0 {
				return nil, io.EOF
			}
			return lr.finish(n, false)
		default:
			return nil, err
		}
	}
}

func (lr *LineReader) finish(n int, newline bool) ([]byte, error) {
	if newline {
		n--
	}
	if n > lr.max {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLineTooLong, n, lr.max)
	}
	// Under the cap the whole line was copied into buf.
	line := lr.buf
	if newline {
		line = line[:len(line)-1]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
	}
	out := make([]byte, len(line))
	copy(out, line)
	return out, nil
}

// Line is one line of an NDJSON stream and what it says.
type Line struct {
	Number int     // 1-based
	Raw    []byte  // the line without its newline; nil for an oversized line
	Msg    Message // valid when Err is nil; otherwise what could be decoded
	Err    error   // this line's problem: oversized, malformed or invalid
}

// Reader reads swarm messages from an NDJSON stream. A bad line never stops
// it: the problem is reported on that Line and the next call goes on.
type Reader struct {
	lr *LineReader
	n  int
}

// NewReader reads messages from r with the spec's 64 KiB line cap.
func NewReader(r io.Reader) *Reader {
	return &Reader{lr: NewLineReader(r, MaxLineBytes)}
}

// Next returns the next line. The error is io.EOF at the end of the input or
// a read error of the underlying reader; per-line problems are in Line.Err.
func (r *Reader) Next() (Line, error) {
	raw, err := r.lr.Next()
	if err != nil && !errors.Is(err, ErrLineTooLong) {
		return Line{}, err
	}
	r.n++
	l := Line{Number: r.n, Raw: raw, Err: err}
	if err == nil {
		l.Msg, l.Err = Parse(raw)
	}
	return l, nil
}
