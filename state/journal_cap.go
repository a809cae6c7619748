package state

import (
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/internal/logcursor"
)

// DefaultJournalCap is the size a container's journal grows to before it
// keeps only what the state needs (RecorderOptions.JournalCap).
const DefaultJournalCap = 128 << 20

// gapEvery is how many bytes of output go unjournaled between two gap
// records once a journal is at its cap: status and logs see the count grow,
// and a crash loses at most this much of the count (the lines are read
// again after a restart and counted then).
const gapEvery = 1 << 20

// Omission is what a gap record says: lines of container output that were
// read but not journaled, their size, and the cursor of the last of them on
// each stream (so a reader resumes after them).
type Omission struct {
	Lines  int64            `json:"lines"`
	Bytes  int64            `json:"bytes"`
	Stdout logcursor.Cursor `json:"stdout"`
	Stderr logcursor.Cursor `json:"stderr"`
}

// capState is a journal's cap bookkeeping, guarded by Recorder.mu.
type capState struct {
	bytes   int64    // journal length including records not yet durable
	noted   bool     // the cap record is in the journal
	omitted Omission // read, not journaled, not yet in a gap record
}

// omit reports whether rec stays out of a journal at its cap: once the
// journal holds cap bytes, only daemon records and lines that change the
// state are journaled (a replay of the journal then still gives the same
// state); other lines are counted into gap records.
func (r *Recorder) omit(j *journal, rec Record, changed bool) bool {
	limit := r.journalCap()
	return limit > 0 && j.cap.bytes >= limit && rec.Stream != StreamDaemon && !changed
}

func (r *Recorder) journalCap() int64 {
	switch {
	case r.opts.JournalCap < 0:
		return 0
	case r.opts.JournalCap == 0:
		return DefaultJournalCap
	}
	return r.opts.JournalCap
}

// omitLocked counts rec as read but not journaled, journaling the cap
// record first and a gap record every gapEvery bytes.
func (r *Recorder) omitLocked(j *journal, rec Record, now time.Time) error {
	if !j.cap.noted {
		note := Record{Stream: StreamDaemon, Omitted: &Omission{},
			Reason: fmt.Sprintf("journal cap of %d bytes reached: from here on only lines that change the state are journaled; gap records count the others", r.journalCap())}
		if err := r.appendLocked(j, note, now); err != nil {
			return err
		}
		j.cap.noted = true
	}
	o := &j.cap.omitted
	o.Lines++
	o.Bytes += int64(len(rec.Raw) + len(rec.RawBase64) + len(rec.Message))
	switch rec.Stream {
	case StreamStdout:
		o.Stdout = rec.Cursor
	case StreamStderr:
		o.Stderr = rec.Cursor
	}
	j.pos.advance(Record{Seq: j.pos.Seq, Omitted: o})
	r.stats.Omitted++
	if o.Bytes >= gapEvery {
		return r.gapLocked(j, now)
	}
	return nil
}

// gapLocked journals the lines counted since the last gap record, if any.
func (r *Recorder) gapLocked(j *journal, now time.Time) error {
	o := j.cap.omitted
	if o.Lines == 0 {
		return nil
	}
	gap := Record{Stream: StreamDaemon, Omitted: &o,
		Reason: fmt.Sprintf("%d lines (%d bytes) of output not journaled: the journal is at its cap", o.Lines, o.Bytes)}
	if err := r.appendLocked(j, gap, now); err != nil {
		return err
	}
	j.cap.omitted = Omission{}
	return nil
}
