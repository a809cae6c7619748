package enginelog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

const (
	// FrameHeaderLen is the multiplexed stream's frame header: stream id, three
	// zero bytes, payload length (big endian).
	FrameHeaderLen = 8
	// maxPrefixLen bounds the search for the timestamp's terminating space
	// (the engine's fixed layout is 30 bytes).
	maxPrefixLen = 64
	// chunkLen is the most of a frame's payload handled at once (the read
	// buffer of a streamed log), so a hostile or huge frame size never means
	// a huge allocation.
	chunkLen = 32 * 1024
	// minBuf is bufio's smallest buffer.
	minBuf = 16
	// engineErrStream is stdcopy.Systemerr: the engine reporting an error in
	// the middle of the stream.
	engineErrStream = 3
)

// errEngineStream marks an error the engine sent inside the log stream.
var errEngineStream = errors.New("engine error in log stream")

// partial is a line that has started (on one stream) but not yet ended.
type partial struct {
	active bool
	cur    logcursor.Cursor
	buf    []byte
	size   int
	over   bool
}

// frameSplitter turns the engine's multiplexed, timestamped log stream into
// lines. Each frame is one log entry "<timestamp> <text>"; text ends in a
// newline unless the entry is a partial piece of a longer line (json-file
// splits at 16 KiB), whose next pieces follow as further frames of the same
// stream. A line's cursor time is the timestamp of its first frame.
//
// Echo rule: a line whose stream, timestamp and bytes equal the previous
// line of its stream is the engine repeating a log entry, not output, and
// is dropped before it is numbered. The engine (20.10, json-file, follow
// with since) was seen delivering every line of a stream twice in a row.
// The logging driver stamps each line with its own clock reading, so two
// real lines of one stream do not share a nanosecond timestamp and the same
// bytes; if a coarse clock ever made them, dropping the second loses
// nothing the fold needs (it is idempotent), and this reader is the only
// layer that drops lines (see Lines).
type frameSplitter struct {
	max  int
	pend [3]partial // indexed by Stream
	// seqs counts lines started per stream and timestamp in this stream of
	// frames, to number lines that share a timestamp. Pruned of old keys.
	seqs    map[seqKey]int
	pruneAt int // prune seqs when it grows past this (amortised: see pruneSeqs)
	newest  int64
	prev    [3]lineSum             // the last line emitted per stream, for the echo rule
	emit    func(engine.Line) bool // false: stop reading
}

type seqKey struct {
	s  engine.Stream
	ns int64
}

// lineSum identifies a line's timestamp and content.
type lineSum struct {
	ns   int64
	size int
	sum  uint64
}

func newFrameSplitter(max int, emit func(engine.Line) bool) *frameSplitter {
	return &frameSplitter{max: max, seqs: map[seqKey]int{}, emit: emit}
}

// errStopped is returned by readFrom when emit asked to stop.
var errStopped = errors.New("stopped by receiver")

// readFrom reads frames until EOF (nil), an error, or emit returning false
// (errStopped). Lines still open at the end stay pending: the caller decides
// whether the output really ended (flush) or the stream merely broke.
//
// The payload is handled in place, in the read buffer, which is all the
// memory a read holds besides the lines: chunkLen for a stream, no more
// than the input for one in memory (a quiet container's snapshot is a few
// hundred bytes, and hundreds of containers are read at once).
func (f *frameSplitter) readFrom(r io.Reader) error {
	br, ok := r.(*bufio.Reader)
	if !ok {
		size := chunkLen
		if in, ok := r.(interface{ Len() int }); ok {
			size = min(chunkLen, max(in.Len(), minBuf))
		}
		br = bufio.NewReaderSize(r, size)
	}
	var hdr [FrameHeaderLen]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read frame header: %w", err)
		}
		stream := int(hdr[0])
		size := int64(binary.BigEndian.Uint32(hdr[4:]))
		if stream == engineErrStream {
			msg, _ := io.ReadAll(io.LimitReader(br, min(size, 4096)))
			return fmt.Errorf("%w: %s", errEngineStream, bytes.TrimSpace(msg))
		}
		if stream != int(engine.Stdout) && stream != int(engine.Stderr) {
			return fmt.Errorf("read frame: unexpected stream id %d (is the container using a TTY?)", stream)
		}
		ts, n, err := readTimestamp(br, size)
		if err != nil {
			return err
		}
		if err := f.payload(br, engine.Stream(stream), ts, size-n); err != nil {
			return err
		}
	}
}

// readTimestamp reads "<RFC 3339 time> " from the start of a frame and
// returns the time and the number of bytes consumed.
func readTimestamp(br *bufio.Reader, size int64) (time.Time, int64, error) {
	limit := min(size, maxPrefixLen)
	var buf [maxPrefixLen]byte
	for i := int64(0); i < limit; i++ {
		b, err := br.ReadByte()
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("read frame timestamp: %w", unexpectedEOF(err))
		}
		if b == ' ' {
			t, err := time.Parse(time.RFC3339Nano, string(buf[:i]))
			if err != nil {
				return time.Time{}, 0, fmt.Errorf("read frame timestamp: %w (were logs requested with timestamps?)", err)
			}
			return t.UTC(), i + 1, nil
		}
		buf[i] = b
	}
	return time.Time{}, 0, fmt.Errorf("read frame timestamp: no timestamp in the first %d bytes of a %d byte frame", limit, size)
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// payload feeds n bytes of one frame to the stream's line assembly.
func (f *frameSplitter) payload(br *bufio.Reader, s engine.Stream, ts time.Time, n int64) error {
	p := &f.pend[s]
	if !p.active {
		f.start(s, p, ts)
	}
	for n > 0 {
		// Peek's slice stays valid until the next read of br: the line
		// assembly copies what it keeps (add) before the loop reads again.
		chunk, err := br.Peek(int(min(n, int64(br.Size()))))
		if err != nil {
			return fmt.Errorf("read frame payload: %w", unexpectedEOF(err))
		}
		br.Discard(len(chunk)) // within what Peek buffered: no read
		n -= int64(len(chunk))
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				f.add(p, chunk)
				break
			}
			f.add(p, chunk[:i])
			chunk = chunk[i+1:]
			if !f.end(s, p) {
				return errStopped
			}
			if len(chunk) > 0 || n > 0 {
				// More text after a newline in one frame: a new line with
				// the same timestamp (not produced by json-file, but cheap
				// to handle).
				f.start(s, p, ts)
			}
		}
	}
	return nil
}

func (f *frameSplitter) start(s engine.Stream, p *partial, ts time.Time) {
	key := seqKey{s, ts.UnixNano()}
	seq := f.seqs[key]
	f.seqs[key] = seq + 1
	if key.ns > f.newest {
		f.newest = key.ns
	}
	if len(f.seqs) > max(f.pruneAt, 4096) {
		f.pruneSeqs()
	}
	*p = partial{active: true, cur: logcursor.Cursor{Time: ts, Seq: seq}, buf: p.buf[:0]}
}

// pruneSeqs forgets timestamps far older than the newest seen: a line can
// only share a timestamp with lines written around the same instant (stdout
// and stderr are logged by two goroutines, so their order may differ by a
// little, never by minutes).
func (f *frameSplitter) pruneSeqs() {
	cutoff := f.newest - int64(time.Minute)
	for k := range f.seqs {
		if k.ns < cutoff {
			delete(f.seqs, k)
		}
	}
	// A flood within one minute keeps every key: without doubling the
	// threshold each later line would scan the whole map again (quadratic:
	// 100,000 lines took 47s instead of 1s).
	f.pruneAt = 2 * len(f.seqs)
}

func (f *frameSplitter) add(p *partial, b []byte) {
	p.size += len(b)
	if p.over {
		return
	}
	if p.size > f.max {
		p.over = true
		p.buf = nil // release the memory of an oversized line at once
		return
	}
	p.buf = append(p.buf, b...)
}

// end completes the stream's pending line and emits it, unless it is an
// echo of the stream's previous line (see frameSplitter).
func (f *frameSplitter) end(s engine.Stream, p *partial) bool {
	h := fnv.New64a()
	h.Write(p.buf)
	sum := lineSum{ns: p.cur.Time.UnixNano(), size: p.size, sum: h.Sum64()}
	if sum == f.prev[s] {
		f.seqs[seqKey{s, p.cur.Time.UnixNano()}]-- // as if it never started
		p.active, p.over, p.size, p.buf = false, false, 0, p.buf[:0]
		return true
	}
	f.prev[s] = sum
	l := engine.Line{Cursor: p.cur, Stream: s, Size: p.size}
	if p.over {
		l.Err = fmt.Errorf("%w: %s line of %d bytes at %s skipped", engine.ErrLineTooLong, s, p.size, p.cur)
	} else {
		l.Data = bytes.Clone(p.buf)
		if l.Data == nil {
			l.Data = []byte{}
		}
	}
	p.active = false
	p.over = false
	p.size = 0
	p.buf = p.buf[:0]
	return f.emit(l)
}

// flush emits lines left open when the output really ended (a last line
// without a newline), oldest first.
func (f *frameSplitter) flush() bool {
	a, b := &f.pend[engine.Stdout], &f.pend[engine.Stderr]
	first, second := engine.Stdout, engine.Stderr
	if a.active && b.active && b.cur.Compare(a.cur) < 0 {
		first, second = engine.Stderr, engine.Stdout
	}
	for _, s := range []engine.Stream{first, second} {
		if p := &f.pend[s]; p.active {
			if !f.end(s, p) {
				return false
			}
		}
	}
	return true
}

// pendingBytes is the size of the lines still open.
func (f *frameSplitter) pendingBytes() int {
	return f.pend[engine.Stdout].size + f.pend[engine.Stderr].size
}
