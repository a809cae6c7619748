package enginelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/aimi-tools/swarm/engine"
)

// since is the oldest time a line not delivered yet can have: each stream's
// lines come in order, so none older than its last cursor is new.
func (r *lineReader) since() time.Time {
	a, b := r.last[engine.Stdout].Time, r.last[engine.Stderr].Time
	if a.IsZero() || b.IsZero() || a.Unix() <= 0 || b.Unix() <= 0 {
		return time.Time{} // the engine's Since takes no times before 1970
	}
	if b.Before(a) {
		return b
	}
	return a
}

// snapshot reads the log once and delivers every line after r.last in the
// log's order. It returns the splitter, which holds the lines still open at
// the end. The tail it asks for holds everything new when it is the whole
// log, or when for every stream it reaches back past the stream's last
// delivered line or far enough before the time the stream was seen
// through; otherwise it asks again for more, and past maxTail or
// maxTailBytes it reads the whole log from since as a stream.
func (r *lineReader) snapshot(ctx context.Context) (*frameSplitter, error) {
	since := r.since()
	for r.tail <= maxTail {
		var buf []byte
		var err error
		buf, err = r.readTail(ctx, since)
		if err != nil {
			return nil, err
		}
		if len(buf) > maxTailBytes {
			break
		}
		n, reaches, err := r.reachesBack(buf)
		if err != nil {
			return nil, err
		}
		if n < r.tail || reaches {
			fs := r.splitter(ctx)
			err := fs.readFrom(bytes.NewReader(buf))
			r.sawThrough(fs, err)
			return fs, err
		}
		r.tail *= 4
	}
	rc, err := r.openLog(ctx, since, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	fs := r.splitter(ctx)
	err = fs.readFrom(rc)
	r.sawThrough(fs, err)
	return fs, err
}

// openLog opens the log as an engine call of the reader (Gate.Call): the
// engine answers the open once it has the container's log driver, which
// needs the container's lock, the one its exit handling holds while it
// waits for the hold-back. Reading the body needs no such lock: the engine
// reads the log files, and a slow read is a loaded engine, not one waiting
// for the hold-back. Counting it as a call let a snapshot of many
// megabytes read on a loaded machine release the hold-back, and the
// container then wrote past the log's rotation lines nobody had read.
func (r *lineReader) openLog(ctx context.Context, since time.Time, tail int) (rc io.ReadCloser, err error) {
	r.call(func() { rc, err = r.open(ctx, since, tail) })
	return rc, err
}

// readTail reads the last r.tail entries at or after since (at most
// maxTailBytes+1 bytes of them).
func (r *lineReader) readTail(ctx context.Context, since time.Time) ([]byte, error) {
	rc, err := r.openLog(ctx, since, r.tail)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, maxTailBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read logs: %w", err)
	}
	return buf, nil
}

// sawThrough moves each stream's seen time after a snapshot that held
// everything new.
func (r *lineReader) sawThrough(fs *frameSplitter, err error) {
	if err != nil || fs.newest == 0 {
		return
	}
	through := time.Unix(0, fs.newest).UTC().Add(-logSkew)
	for _, s := range []engine.Stream{engine.Stdout, engine.Stderr} {
		if through.After(r.seen[s]) {
			r.seen[s] = through
		}
		if t := r.last[s].Time; t.After(r.seen[s]) {
			r.seen[s] = t
		}
	}
}

func (r *lineReader) splitter(ctx context.Context) *frameSplitter {
	return newFrameSplitter(engine.MaxLineBytes, func(l engine.Line) bool { return r.deliver(ctx, l) })
}

// reachesBack counts the frames in buf and reports whether they hold every
// line of each stream after its last cursor: the tail has an older line of
// that stream (the stream's lines are in order, so all later ones follow
// it, whole), or it starts logSkew or more before the time the stream was
// seen through (a line logged before the tail's first entry is at most
// logSkew younger than it, so it is older than that time: delivered).
func (r *lineReader) reachesBack(buf []byte) (n int, reaches bool, err error) {
	var hasOld [3]bool
	var first time.Time
	for len(buf) > 0 {
		if len(buf) < FrameHeaderLen {
			return n, false, fmt.Errorf("read frame header: %w", io.ErrUnexpectedEOF)
		}
		s, size := int(buf[0]), int(binary.BigEndian.Uint32(buf[4:FrameHeaderLen]))
		buf = buf[FrameHeaderLen:]
		if size > len(buf) {
			return n, false, fmt.Errorf("read frame payload: %w", io.ErrUnexpectedEOF)
		}
		payload := buf[:size]
		buf = buf[size:]
		n++
		if s != int(engine.Stdout) && s != int(engine.Stderr) {
			continue // readFrom reports it
		}
		sp := bytes.IndexByte(payload[:min(len(payload), maxPrefixLen)], ' ')
		if sp < 0 {
			continue
		}
		ts, perr := time.Parse(time.RFC3339Nano, string(payload[:sp]))
		if perr != nil {
			continue
		}
		if first.IsZero() {
			first = ts
		}
		if last := r.last[s]; !last.IsZero() && ts.Before(last.Time) {
			hasOld[s] = true
		}
	}
	for _, s := range []engine.Stream{engine.Stdout, engine.Stderr} {
		if hasOld[s] {
			continue
		}
		if r.seen[s].IsZero() || first.IsZero() || first.Add(logSkew).After(r.seen[s]) {
			return n, false, nil
		}
	}
	return n, true, nil
}

// deliver sends l unless its stream already delivered it (or it is at or
// before `after`).
func (r *lineReader) deliver(ctx context.Context, l engine.Line) bool {
	if !l.Cursor.After(r.last[l.Stream]) {
		return true
	}
	r.last[l.Stream] = l.Cursor
	select {
	case r.out <- l:
		r.delivered++
		if r.gate != nil {
			r.gate.Delivered(l.Size)
		}
		return true
	case <-ctx.Done():
		return false
	}
}
