package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aimi-tools/swarm/internal/logcursor"
)

// A journal grows to its cap (128 MiB by default, about a million records)
// from output a container chooses, so its readers stream it: each holds one
// record at a time (plus a read buffer), whatever the journal's length.
// ReadJournal is the one exception, for tests and tools.

// StopScan, returned by a ScanJournal callback, ends the scan early
// without an error.
var StopScan = errors.New("stop the journal scan")

// ScanJournal calls fn for every complete record of the journal at path, in
// order, one at a time; a torn last line is skipped, any other bad line
// ends the scan with an error naming it. fn's error ends the scan and is
// returned, except StopScan, which ends it with nil. A missing journal is
// an error wrapping os.ErrNotExist.
func ScanJournal(path string, fn func(Record) error) error {
	_, err := ScanJournalFrom(path, 0, fn)
	return err
}

// ScanJournalFrom is ScanJournal starting at byte offset (0, JournalStart's
// answer, or a next from an earlier call); it returns the offset after the
// last record given to fn, so a follower reads each record once however
// long the journal grows. A torn last line is left for the next call.
func ScanJournalFrom(path string, offset int64, fn func(Record) error) (next int64, err error) {
	f, err := openJournalRead(path)
	if err != nil {
		return offset, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, fmt.Errorf("read journal %s from %d: %w", path, offset, err)
	}
	next = offset
	err = scanJournal(f, func(r Record, size int) error {
		if err := fn(r); err != nil {
			return err
		}
		next += int64(size)
		return nil
	})
	if errors.Is(err, StopScan) {
		return next, nil
	}
	if err != nil {
		return next, fmt.Errorf("read journal %s: %w", path, err)
	}
	return next, nil
}

// From selects the end of a journal a reader starts at; the zero From is
// the whole journal. Every limit set applies: the records read are the
// longest run at the end that meets them all.
type From struct {
	Tail     int       // at most this many records (0: no limit)
	Since    time.Time // records journaled at or after this time
	AfterSeq int64     // records with a seq above this one
}

// IsZero reports whether f selects the whole journal.
func (f From) IsZero() bool { return f.Tail <= 0 && f.Since.IsZero() && f.AfterSeq <= 0 }

// JournalStart returns the byte offset of the first record from selects,
// for ScanJournalFrom. It reads the journal backwards from its end, as far
// as the selection reaches, one record at a time: a tail of a journal at
// its cap costs what the tail holds. A missing journal starts at 0.
func JournalStart(path string, from From) (int64, error) {
	if from.IsZero() {
		return 0, nil
	}
	f, err := openJournalRead(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	b, err := newBackLines(f)
	if err != nil {
		return 0, fmt.Errorf("read journal %s: %w", path, err)
	}
	for n := 0; from.Tail <= 0 || n < from.Tail; n++ {
		line, start, err := b.prev()
		if err == io.EOF {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read journal %s backwards: %w", path, err)
		}
		if !from.Since.IsZero() || from.AfterSeq > 0 {
			var r struct {
				Seq  int64     `json:"seq"`
				Time time.Time `json:"time"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				return 0, fmt.Errorf("read journal %s at byte %d: %w", path, start, err)
			}
			if r.Time.Before(from.Since) || r.Seq <= from.AfterSeq {
				return b.end, nil // the record after this one
			}
		}
		b.end = start
	}
	return b.end, nil
}

// backLines reads a journal's complete lines from the end backwards,
// holding one line and a chunk.
type backLines struct {
	f   *os.File
	end int64  // the lines before this offset are still to be read
	buf []byte // the file's bytes [off, off+len(buf)), ending at or after end
	off int64
}

const backChunk = 64 << 10

// newBackLines starts after the journal's last newline: a torn last line
// is never read.
func newBackLines(f *os.File) (*backLines, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := &backLines{f: f, end: st.Size(), off: st.Size()}
	for {
		if i := bytes.LastIndexByte(b.buf[:b.end-b.off], '\n'); i >= 0 {
			b.end = b.off + int64(i) + 1
			return b, nil
		}
		if b.off == 0 {
			b.end = 0
			return b, nil
		}
		if err := b.more(); err != nil {
			return nil, err
		}
	}
}

// more reads the chunk before the buffer into it.
func (b *backLines) more() error {
	keep := b.buf[:b.end-b.off]
	// The chunk grows with the line, so a long line is copied a few times,
	// not once per chunk.
	n := min(max(int64(backChunk), int64(len(keep))), b.off)
	if int64(len(keep)) > maxRecordBytes+1 {
		return fmt.Errorf("record longer than %d bytes before byte %d", maxRecordBytes, b.end)
	}
	nb := make([]byte, n+int64(len(keep)))
	if _, err := b.f.ReadAt(nb[:n], b.off-n); err != nil && err != io.EOF {
		return err
	}
	copy(nb[n:], keep)
	b.buf, b.off = nb, b.off-n
	return nil
}

// prev returns the line that ends at b.end (without its newline) and the
// offset it starts at; the caller moves b.end to that start to go on. At
// the start of the file it returns io.EOF.
func (b *backLines) prev() ([]byte, int64, error) {
	if b.end <= 0 {
		return nil, 0, io.EOF
	}
	for {
		body := b.buf[:b.end-1-b.off] // without the newline ending the line
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			return body[i+1:], b.off + int64(i) + 1, nil
		}
		if b.off == 0 {
			return body, 0, nil
		}
		if err := b.more(); err != nil {
			return nil, 0, err
		}
	}
}

// Byte patterns lastPosition tells lines apart by. The daemon writes records
// with encoding/json, in which a quote inside a string is always escaped: a
// key with its colon, or a key and a string value, never occurs inside a
// string, so a line that lacks one has no such field.
var (
	keyOmitted   = []byte(`"omitted":`)
	keyMessage   = []byte(`"message":`)
	zeroCursor   = []byte(`"cursor":"",`)
	streamStdout = []byte(`"stream":"stdout"`)
	streamStderr = []byte(`"stream":"stderr"`)
)

// lastPosition is where a journal ends (see Position), and whether it
// reached its cap (it holds a gap record), read from its end backwards: the
// last record gives the seq, the last record of each stream with a cursor
// gives that stream's cursor (moved on by any later gap record, whose
// cursors are those of lines left out), and the first gap record found
// says the cap was reached. Only the records that can change the answer
// are decoded; for the rest of a journal at its cap this reads bytes.
func lastPosition(path string) (Position, bool, error) {
	f, err := openJournalRead(path)
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	b, err := newBackLines(f)
	if err != nil {
		return Position{}, false, fmt.Errorf("read journal %s: %w", path, err)
	}
	var w backPosition
	for first := true; !w.complete(); first = false {
		line, start, err := b.prev()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Position{}, false, fmt.Errorf("read journal %s backwards: %w", path, err)
		}
		b.end = start
		if !first && !w.mayChange(line) {
			continue
		}
		r, err := DecodeRecord(line)
		if err != nil {
			return Position{}, false, fmt.Errorf("read journal %s: the record at byte %d: %w", path, start, err)
		}
		if first {
			w.pos.Seq = r.Seq
		}
		w.take(r)
	}
	return w.result(), w.capped, nil
}

// backPosition is lastPosition's walk: what it found so far, newest first.
type backPosition struct {
	pos              Position
	outDone, errDone bool // the stream's last record with a cursor was found
	gapOut, gapErr   logcursor.Cursor
	capped           bool
}

func (w *backPosition) complete() bool { return w.outDone && w.errDone && w.capped }

// mayChange reports whether line can change the walk's answer: a gap
// record, or a record with a cursor on a stream not found yet.
func (w *backPosition) mayChange(line []byte) bool {
	if bytes.Contains(line, keyOmitted) {
		return true
	}
	out := !w.outDone && bytes.Contains(line, streamStdout)
	errs := !w.errDone && bytes.Contains(line, streamStderr)
	if !out && !errs {
		return false
	}
	// A line without a cursor moves nothing; a message could hold the
	// pattern, so a line with one is decoded.
	return !bytes.Contains(line, zeroCursor) || bytes.Contains(line, keyMessage)
}

// take folds in r, which comes before everything taken so far.
func (w *backPosition) take(r Record) {
	if o := r.Omitted; o != nil {
		w.capped = true
		if !w.outDone && o.Stdout.After(w.gapOut) {
			w.gapOut = o.Stdout
		}
		if !w.errDone && o.Stderr.After(w.gapErr) {
			w.gapErr = o.Stderr
		}
	}
	if r.Cursor.IsZero() {
		return
	}
	switch {
	case r.Stream == StreamStdout && !w.outDone:
		w.pos.Stdout, w.outDone = later(r.Cursor, w.gapOut), true
	case r.Stream == StreamStderr && !w.errDone:
		w.pos.Stderr, w.errDone = later(r.Cursor, w.gapErr), true
	}
}

// result is the position: a stream without a record with a cursor is at
// its latest gap cursor (or the start).
func (w *backPosition) result() Position {
	p := w.pos
	if !w.outDone {
		p.Stdout = w.gapOut
	}
	if !w.errDone {
		p.Stderr = w.gapErr
	}
	return p
}

func later(a, b logcursor.Cursor) logcursor.Cursor {
	if b.After(a) {
		return b
	}
	return a
}
