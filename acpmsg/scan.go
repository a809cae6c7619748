package acpmsg

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a strict, allocation-light JSON reader for one message line.
//
// Why not encoding/json: decoding the envelope and then the payload through
// json.RawMessage scans the payload four times and allocates per field,
// which caps a core at about a third of the 150,000 messages/s the
// orchestrator must sustain. It is also case-insensitive about keys
// ({"TYPE":...} would pass as a type), which the spec does not allow. The
// scanner accepts exactly RFC 8259 JSON (checked against encoding/json by
// FuzzScannerAgreesWithEncodingJSON) and matches keys exactly; duplicate
// keys keep the last value, as encoding/json does.
type scanner struct {
	data []byte
	pos  int
}

// maxDepth bounds nesting of skipped values, as encoding/json does.
const maxDepth = 10000

var errSyntax = errors.New("syntax error")

func (s *scanner) fail(what string) error {
	if s.pos >= len(s.data) {
		return fmt.Errorf("%w: unexpected end of JSON input (%s)", errSyntax, what)
	}
	return fmt.Errorf("%w: invalid character %q at byte %d (%s)", errSyntax, s.data[s.pos], s.pos, what)
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// kindAt names the JSON kind of the value starting at the current position.
func (s *scanner) kindAt() string {
	switch s.peek() {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// object calls field for each key of the object at the current position;
// field must consume the value.
func (s *scanner) object(field func(key string) error) error {
	if s.peek() != '{' {
		return s.fail("expected an object")
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.fail("expected a key")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.fail("expected ':'")
		}
		s.pos++
		s.ws()
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// str reads a string at the current position (which must be '"').
// Invalid UTF-8 and lone surrogates become U+FFFD, as with encoding/json.
func (s *scanner) str() (string, error) {
	s.pos++ // opening quote
	start := s.pos
	// Fast path: plain ASCII without escapes.
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			out := intern(s.data[start:s.pos])
			s.pos++
			return out, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		s.pos++
	}
	return s.strSlow(start)
}

// strSlow finishes the string that began at start from the first byte the
// fast path of str does not take: an escape, a control character, a
// non-ASCII byte or the end of the data.
func (s *scanner) strSlow(start int) (string, error) {
	buf := make([]byte, 0, s.pos-start+16)
	buf = append(buf, s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(buf), nil
		case c < 0x20:
			return "", s.fail("control character in string")
		case c == '\\':
			var err error
			if buf, err = s.escape(buf); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, s.data[s.pos:s.pos+size]...)
			}
			s.pos += size
		}
	}
	return "", s.fail("unterminated string")
}

// escape reads the escape whose backslash is at the current position and
// appends the character it stands for to buf.
func (s *scanner) escape(buf []byte) ([]byte, error) {
	s.pos++
	if s.pos >= len(s.data) {
		return buf, s.fail("escape")
	}
	e := s.data[s.pos]
	s.pos++
	switch e {
	case '"', '\\', '/':
		return append(buf, e), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		r, ok := s.hex4()
		if !ok {
			return buf, s.fail("\\u escape")
		}
		if utf16.IsSurrogate(r) {
			r = s.surrogate(r)
		}
		return utf8.AppendRune(buf, r), nil
	}
	s.pos -= 1
	return buf, s.fail("escape")
}

// surrogate returns the rune of the pair that hi begins when an escaped
// partner follows (consuming it), and U+FFFD otherwise, leaving the next
// escape to stand alone.
func (s *scanner) surrogate(hi rune) rune {
	if d := s.data; s.pos+6 <= len(d) && d[s.pos] == '\\' && d[s.pos+1] == 'u' {
		if lo, ok := parseHex4(d[s.pos+2 : s.pos+6]); ok {
			if dec := utf16.DecodeRune(hi, lo); dec != utf8.RuneError {
				s.pos += 6
				return dec
			}
		}
	}
	return utf8.RuneError
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	r, ok := parseHex4(s.data[s.pos : s.pos+4])
	if ok {
		s.pos += 4
	}
	return r, ok
}

func parseHex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skip consumes one value of any kind, checking its syntax.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	switch s.peek() {
	case '"':
		return s.skipString()
	case '{':
		return s.object(func(string) error { return s.skip(depth + 1) })
	case '[':
		return s.array(func() error { return s.skip(depth + 1) })
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// skipString checks a string without building it.
func (s *scanner) skipString() error {
	s.pos++
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c < 0x20:
			return s.fail("control character in string")
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return s.fail("escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				if _, ok := s.hex4(); !ok {
					return s.fail("\\u escape")
				}
			default:
				return s.fail("escape")
			}
		default:
			s.pos++
		}
	}
	return s.fail("unterminated string")
}

// array calls elem for each element; elem must consume it.
func (s *scanner) array(elem func() error) error {
	if s.peek() != '[' {
		return s.fail("expected an array")
	}
	s.pos++
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		s.ws()
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("expected " + lit)
	}
	s.pos += len(lit)
	return nil
}

// number checks -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (s *scanner) number() error {
	d := s.data
	p := s.pos
	if p < len(d) && d[p] == '-' {
		p++
	}
	switch {
	case p < len(d) && d[p] == '0':
		p++
	case p < len(d) && d[p] >= '1' && d[p] <= '9':
		for p < len(d) && isDigit(d[p]) {
			p++
		}
	default:
		s.pos = p
		return s.fail("expected a value")
	}
	if p < len(d) && d[p] == '.' {
		p++
		if p >= len(d) || !isDigit(d[p]) {
			s.pos = p
			return s.fail("number")
		}
		for p < len(d) && isDigit(d[p]) {
			p++
		}
	}
	if p < len(d) && (d[p] == 'e' || d[p] == 'E') {
		p++
		if p < len(d) && (d[p] == '+' || d[p] == '-') {
			p++
		}
		if p >= len(d) || !isDigit(d[p]) {
			s.pos = p
			return s.fail("number")
		}
		for p < len(d) && isDigit(d[p]) {
			p++
		}
	}
	s.pos = p
	return nil
}

// end checks that only whitespace follows.
func (s *scanner) end() error {
	if s.peek() != 0 || s.pos < len(s.data) {
		return s.fail("data after the JSON object")
	}
	return nil
}

// intern returns the constant for the enum values every message carries,
// saving an allocation per field; other strings are copied.
func intern(b []byte) string {
	switch string(b) { // the compiler does not allocate for this conversion
	case "task-request":
		return string(TypeTaskRequest)
	case "progress-update":
		return string(TypeProgressUpdate)
	case "completion":
		return string(TypeCompletion)
	case "error":
		return string(TypeError)
	case "pending":
		return StoryPending
	case "in_progress":
		return StoryInProgress
	case "completed":
		return StoryCompleted
	case "failed":
		return StoryFailed
	case "skipped":
		return StorySkipped
	case "stopped":
		return CompletionStopped
	}
	return string(b)
}
