package acpmsg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// TimestampLayout is the layout NewMessage uses: RFC 3339 in UTC with
// milliseconds, so that messages sent within one second keep their order.
const TimestampLayout = "2006-01-02T15:04:05.000Z07:00"

// Writer writes swarm messages as NDJSON and refuses to emit an invalid one.
// It is safe for concurrent use: each message is one Write of one full line.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

// NewWriter writes messages to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Write validates m and writes it as one line. An invalid message, or one
// whose encoding exceeds MaxLineBytes, is not written; the error says why.
func (w *Writer) Write(m Message) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("refuse to write %s message: %w", m.Type, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	if err := Encode(&w.buf, m); err != nil {
		return err
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("write %s message: %w", m.Type, err)
	}
	return nil
}

// Encode appends m as one JSON line (with its newline) to buf without
// validating it, except for the line cap. HTML escaping is off: the
// reader is not a browser and escapes make lines longer.
func Encode(buf *bytes.Buffer, m Message) error {
	start := buf.Len()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		buf.Truncate(start)
		return fmt.Errorf("encode %s message: %w", m.Type, err)
	}
	if n := buf.Len() - start - 1; n > MaxLineBytes {
		buf.Truncate(start)
		return fmt.Errorf("encode %s message: %w: %d bytes, limit %d (shorten output or errors)", m.Type, ErrLineTooLong, n, MaxLineBytes)
	}
	return nil
}

// Marshal returns m as one JSON line without the newline; see Encode.
func Marshal(m Message) ([]byte, error) {
	var buf bytes.Buffer
	if err := Encode(&buf, m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// NewMessage builds an envelope stamped with the current time (UTC). It does
// not validate; Writer.Write does.
func NewMessage(t Type, swarmID, containerID string, p Payload) Message {
	return Message{
		Type:        t,
		Timestamp:   time.Now().UTC().Format(TimestampLayout),
		SwarmID:     swarmID,
		ContainerID: containerID,
		Payload:     p,
	}
}

// TruncateOutput cuts s to MaxOutputChars characters on a character
// boundary (the limit of progress-update.output and error.message). Invalid
// UTF-8 is replaced first, since the message must be valid UTF-8 anyway.
func TruncateOutput(s string) string {
	return truncateRunes(s, MaxOutputChars)
}

// CapErrors returns errs cut to the completion limits: at most
// MaxCompletionErrors entries of at most MaxCompletionError characters each.
// The result is never nil, because completion.errors must be present.
func CapErrors(errs []string) []string {
	n := min(len(errs), MaxCompletionErrors)
	out := make([]string, n)
	for i := range n {
		out[i] = truncateRunes(errs[i], MaxCompletionError)
	}
	return out
}

func truncateRunes(s string, max int) string {
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	}
	if len(s) <= max { // fewer bytes than the limit means fewer characters
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}
