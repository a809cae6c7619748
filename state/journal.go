package state

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/tasks"
	"github.com/aimi-tools/swarm/usage"
)

// Journal record streams.
const (
	StreamStdout = "stdout" // a line the container wrote to stdout
	StreamStderr = "stderr" // a line the container wrote to stderr
	StreamDaemon = "daemon" // a decision of the daemon (OOM, crash, timeout, what it sent)
)

// TypeEgressDenied is the type of a daemon record (no message) of a
// request the egress proxy refused the container; its reason is the
// method, the host:port and why. The daemon writes it, the status view
// counts it, `aimi swarm logs` and the board show it.
const TypeEgressDenied = "egress-denied"

// TypeGitRefused is the type of a daemon record (no message) of a request
// the local-mode git service refused the container; its reason is the
// service's (package gitserve's OnRefused). The daemon writes it, the
// status view counts it, `aimi swarm logs` and the board show it.
const TypeGitRefused = "git-refused"

// TypeLand is the type of the records of a swarm's land journal (its
// reason says what the land did: a branch's outcome, a fix-up started).
// LandJournal is the name `aimi swarm logs` takes for it: no container
// is named so (container names begin with "aimi-").
const (
	TypeLand    = "land"
	LandJournal = "land"
)

// redacted replaces task-request envVars values in the journal.
const redacted = "[redacted]"

// maxRecordBytes bounds one journal line when reading: a 64 KiB message
// line escaped as JSON can grow up to six times, plus the record fields.
const maxRecordBytes = 8 << 20

// Record is one journal line. See the package doc for the format.
type Record struct {
	Seq       int64            `json:"seq"`
	Cursor    logcursor.Cursor `json:"cursor"`
	Time      time.Time        `json:"time"`
	Stream    string           `json:"stream"`
	Valid     bool             `json:"valid,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	Type      string           `json:"type,omitempty"`
	Message   json.RawMessage  `json:"message,omitempty"`
	Raw       string           `json:"raw,omitempty"`
	RawBase64 string           `json:"rawBase64,omitempty"`
	Rejected  string           `json:"rejected,omitempty"`
	Omitted   *Omission        `json:"omitted,omitempty"` // a gap record: lines read but not journaled (journal cap)
	// Usage makes a daemon record the account of one model call through
	// the model gateway (tokens, cost); it is not a message and not folded.
	Usage *usage.Call `json:"usage,omitempty"`
}

// SetRaw stores a line that did not parse, base64-encoded when it is not
// UTF-8 (JSON strings would replace its bad bytes).
func (r *Record) SetRaw(line []byte) {
	if utf8.Valid(line) {
		r.Raw, r.RawBase64 = string(line), ""
		return
	}
	r.Raw, r.RawBase64 = "", base64.StdEncoding.EncodeToString(line)
}

// RawLine returns the stored raw line, decoding base64 if needed.
func (r *Record) RawLine() []byte {
	if r.RawBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(r.RawBase64)
		if err == nil {
			return b
		}
	}
	return []byte(r.Raw)
}

// DecodeMessage returns the record's message, or nil for a record without
// one. Journals are written by this package from validated messages; this
// decodes the envelope and payload by type without re-validating.
func (r *Record) DecodeMessage() (*acpmsg.Message, error) {
	if len(r.Message) == 0 || bytes.Equal(r.Message, []byte("null")) {
		return nil, nil
	}
	return decodeMessage(r.Message)
}

func decodeMessage(b []byte) (*acpmsg.Message, error) {
	var env struct {
		Type        acpmsg.Type     `json:"type"`
		Timestamp   string          `json:"timestamp"`
		SwarmID     string          `json:"swarmId"`
		ContainerID string          `json:"containerId"`
		Payload     json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("decode journaled message: %w", err)
	}
	var p acpmsg.Payload
	switch env.Type {
	case acpmsg.TypeTaskRequest:
		p = &acpmsg.TaskRequest{}
	case acpmsg.TypeProgressUpdate:
		p = &acpmsg.ProgressUpdate{}
	case acpmsg.TypeCompletion:
		p = &acpmsg.Completion{}
	case acpmsg.TypeError:
		p = &acpmsg.ErrorPayload{}
	default:
		return nil, fmt.Errorf("decode journaled message: unknown type %q", env.Type)
	}
	if err := json.Unmarshal(env.Payload, p); err != nil {
		return nil, fmt.Errorf("decode journaled %s payload: %w", env.Type, err)
	}
	return &acpmsg.Message{Type: env.Type, Timestamp: env.Timestamp, SwarmID: env.SwarmID,
		ContainerID: env.ContainerID, Payload: p}, nil
}

// encodeMessage marshals a message for the journal with task-request
// envVars values redacted.
func encodeMessage(m *acpmsg.Message) (json.RawMessage, error) {
	if tr, ok := m.Payload.(*acpmsg.TaskRequest); ok && len(tr.EnvVars) > 0 {
		cp := *tr
		cp.EnvVars = make(map[string]string, len(tr.EnvVars))
		for k := range tr.EnvVars {
			cp.EnvVars[k] = redacted
		}
		mm := *m
		mm.Payload = &cp
		m = &mm
	}
	type envelope struct { // without any custom marshaller of acpmsg.Message
		Type        acpmsg.Type    `json:"type"`
		Timestamp   string         `json:"timestamp"`
		SwarmID     string         `json:"swarmId"`
		ContainerID string         `json:"containerId"`
		Payload     acpmsg.Payload `json:"payload"`
	}
	return json.Marshal(envelope{m.Type, m.Timestamp, m.SwarmID, m.ContainerID, m.Payload})
}

// DecodeRecord parses one journal line (without its newline).
func DecodeRecord(line []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("decode journal record: %w", err)
	}
	if dec.More() {
		return Record{}, errors.New("decode journal record: content after the JSON object")
	}
	if r.Seq < 1 {
		return Record{}, fmt.Errorf("decode journal record: seq %d is not positive", r.Seq)
	}
	switch r.Stream {
	case StreamStdout, StreamStderr, StreamDaemon:
	default:
		return Record{}, fmt.Errorf("decode journal record: unknown stream %q", r.Stream)
	}
	return r, nil
}

// ReadJournal reads every record of a journal file into memory: for tests
// and tools. The daemon never calls it (a journal at its cap is about a
// million records); its readers stream with ScanJournal. A torn last line
// is ignored; any other bad line is an error naming it, returned with the
// records before it.
func ReadJournal(path string) ([]Record, error) {
	var recs []Record
	err := ScanJournal(path, func(r Record) error { recs = append(recs, r); return nil })
	return recs, err
}

// scanJournal calls fn for every complete record of r with its size in
// bytes, newline included.
func scanJournal(r io.Reader, fn func(rec Record, size int) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br, maxRecordBytes)
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, errTorn) {
			return nil // never acknowledged; see the package doc
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		rec, err := DecodeRecord(line)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if err := fn(rec, len(line)+1); err != nil {
			return err
		}
	}
}

var errTorn = errors.New("torn last line")

// readLine returns the next line without its newline; errTorn for a final
// line without one; an error for a line over max.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > max+1 {
			return nil, fmt.Errorf("record longer than %d bytes", max)
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errTorn
		default:
			return nil, err
		}
	}
}

// Position is where a journal ends: the last seq written and the engine
// cursor of the last line journaled from each stream, the point a reader of
// the container's output resumes from (container.Lines takes it as is).
type Position struct {
	Seq int64
	logcursor.Position
}

// advance moves p past r.
func (p *Position) advance(r Record) {
	p.Seq = r.Seq
	if o := r.Omitted; o != nil {
		if o.Stdout.After(p.Stdout) {
			p.Stdout = o.Stdout
		}
		if o.Stderr.After(p.Stderr) {
			p.Stderr = o.Stderr
		}
	}
	switch {
	case r.Cursor.IsZero():
	case r.Stream == StreamStdout:
		p.Stdout = r.Cursor
	case r.Stream == StreamStderr:
		p.Stderr = r.Cursor
	}
}

// LastPosition returns the position at the end of a journal, read from
// its end (lastPosition). A missing journal is the zero Position.
func LastPosition(path string) (Position, error) {
	pos, _, err := lastPosition(path)
	return pos, err
}

// RestoreTracker rebuilds a container's fold after a restart by replaying
// the valid, accepted messages of its journal over a tracker built from the
// task file (records rejected the first time are skipped).
// A missing journal gives a fresh tracker. It also returns where the journal
// ends, to resume reading the container's logs from.
func RestoreTracker(path string, tf *tasks.File) (*Tracker, Position, error) {
	return ReplayJournal(path, tf, nil)
}

// ReplayJournal is RestoreTracker that also gives every record to each (when
// set), in the same single pass: a journal at its cap is read once however
// much its reader rebuilds from it.
func ReplayJournal(path string, tf *tasks.File, each func(Record)) (*Tracker, Position, error) {
	t := NewTracker(tf)
	f, err := openJournalRead(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, Position{}, nil
	}
	if err != nil {
		return nil, Position{}, fmt.Errorf("restore from journal: %w", err)
	}
	defer f.Close()
	var pos Position
	err = scanJournal(f, func(r Record, _ int) error {
		pos.advance(r)
		if each != nil {
			each(r)
		}
		if !r.Valid || r.Rejected != "" {
			// Rejected once, rejected for good: replaying it could only
			// differ where the first verdict depended on more than the
			// fold (a message addressed to another swarm or container).
			return nil
		}
		m, err := r.DecodeMessage()
		if err != nil {
			return fmt.Errorf("seq %d: %w", r.Seq, err)
		}
		if m != nil {
			_ = t.Apply(*m)
		}
		return nil
	})
	if err != nil {
		return nil, pos, fmt.Errorf("restore from journal %s: %w (move the journal aside to start the container's fold afresh)", path, err)
	}
	return t, pos, nil
}
