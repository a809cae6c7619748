package usage

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"mime"
	"strings"
)

// Bounds of what a Meter holds and does, whatever the answer.
const (
	// maxLineBytes bounds one SSE line; a longer line (streamed content)
	// is skipped: usage events are small.
	maxLineBytes = 1 << 20
	// maxHeadBytes is how much of a JSON answer is kept whole; past it
	// only a tail window is kept too (usage comes last in the providers'
	// answers).
	maxHeadBytes = 4 << 20
	maxTailBytes = 256 << 10
	// maxBlockBytes bounds the usage object decoded at one occurrence.
	maxBlockBytes = 16 << 10
	// maxBlocks bounds the usage objects decoded per answer.
	maxBlocks = 4096
	// maxTokens bounds one count: a bigger one is taken as garbage.
	maxTokens = 1 << 40
)

// Meter reads one answer's body as it streams (Write) and tells its token
// usage (Usage). It never fails and holds bounded memory.
type Meter struct {
	sse    bool
	line   []byte
	skip   bool // the current SSE line is over maxLineBytes
	head   []byte
	tail   []byte
	over   bool // the JSON answer outgrew head
	blocks int
	acc    acc
	done   bool
}

// NewMeter returns a Meter for an answer of that Content-Type: SSE for
// text/event-stream, JSON otherwise (a JSON array of chunks too, as
// Gemini streams without alt=sse).
func NewMeter(contentType string) *Meter {
	mt, _, _ := mime.ParseMediaType(contentType)
	return &Meter{sse: strings.EqualFold(mt, "text/event-stream")}
}

var _ io.Writer = (*Meter)(nil)

// Write takes the next chunk of the body; it never returns an error.
func (m *Meter) Write(p []byte) (int, error) {
	if m.done {
		return len(p), nil
	}
	if m.sse {
		m.writeSSE(p)
		return len(p), nil
	}
	if room := maxHeadBytes - len(m.head); room > 0 {
		k := min(room, len(p))
		m.head = append(m.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		m.over = true
		m.tail = append(m.tail, p...)
		if len(m.tail) > 2*maxTailBytes {
			m.tail = append(m.tail[:0], m.tail[len(m.tail)-maxTailBytes:]...)
		}
	}
	return len(p), nil
}

func (m *Meter) writeSSE(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !m.skip {
			if len(m.line)+len(chunk) > maxLineBytes {
				m.skip, m.line = true, m.line[:0]
			} else {
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !m.skip {
			m.event(m.line)
		}
		m.line, m.skip = m.line[:0], false
		p = p[i+1:]
	}
}

// event reads one SSE line: only data lines carry usage.
func (m *Meter) event(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		m.scan(data)
	}
}

// Usage is what the answer reported, as far as it was readable. It may be
// called once the answer is over; later writes are ignored.
func (m *Meter) Usage() Usage {
	if !m.done {
		m.done = true
		switch {
		case m.sse && !m.skip && len(m.line) > 0:
			m.event(m.line) // a last line without its newline
		case !m.sse:
			m.scan(m.head)
			if m.over {
				m.scan(m.tail)
			}
		}
		m.line, m.head, m.tail = nil, nil, nil
	}
	return m.acc.usage()
}

// Parse is the usage of a whole answer body.
func Parse(contentType string, body []byte) Usage {
	m := NewMeter(contentType)
	m.Write(body)
	return m.Usage()
}

var (
	keyUsage    = []byte(`"usage"`)
	keyMetadata = []byte(`"usageMetadata"`)
)

// scan finds every "usage" and "usageMetadata" member in b, at any depth
// (Anthropic's message_start nests it in message, OpenAI's
// response.completed in response), and folds each in order. A key inside
// a JSON string is escaped there (\"usage\") and never matches.
func (m *Meter) scan(b []byte) {
	for i := 0; i < len(b) && m.blocks < maxBlocks; {
		j := bytes.Index(b[i:], []byte(`"usage`))
		if j < 0 {
			return
		}
		j += i
		i = j + 1
		var gemini bool
		var rest []byte
		switch {
		case bytes.HasPrefix(b[j:], keyUsage):
			rest = b[j+len(keyUsage):]
		case bytes.HasPrefix(b[j:], keyMetadata):
			rest, gemini = b[j+len(keyMetadata):], true
		default:
			continue
		}
		rest = bytes.TrimLeft(rest, " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		m.blocks++
		var obj map[string]json.RawMessage
		if json.NewDecoder(io.LimitReader(bytes.NewReader(rest[1:]), maxBlockBytes)).Decode(&obj) != nil {
			continue
		}
		if gemini {
			m.acc.gemini(obj)
		} else {
			m.acc.usage1(obj)
		}
	}
}

// acc folds usage blocks: a later block's counts replace the earlier
// ones they name, because the providers' streamed counts are cumulative
// (Anthropic's message_delta, Gemini's chunks) or come once (OpenAI's last
// chunk).
type acc struct {
	v   [4]int64 // input, output, cache read, cache write
	set [4]bool
}

func (a *acc) put(i int, v int64, ok bool) {
	if ok {
		a.v[i], a.set[i] = v, true
	}
}

func (a *acc) usage() Usage {
	return Usage{Input: a.v[0], Output: a.v[1], CacheRead: a.v[2], CacheWrite: a.v[3]}
}

// count is a token count: a whole number from 0 to maxTokens, else absent.
func count(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 || f > maxTokens || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

func field(obj map[string]json.RawMessage, path ...string) (int64, bool) {
	for _, k := range path[:len(path)-1] {
		var inner map[string]json.RawMessage
		if json.Unmarshal(obj[k], &inner) != nil {
			return 0, false
		}
		obj = inner
	}
	return count(obj[path[len(path)-1]])
}

// usage1 reads a "usage" object: OpenAI's Chat Completions
// (prompt_tokens, cached ones included), OpenAI's Responses
// (input_tokens with input_tokens_details) or Anthropic's (input_tokens
// without the cache, whose reads and writes are counted apart).
func (a *acc) usage1(obj map[string]json.RawMessage) {
	_, chat := obj["prompt_tokens"]
	_, chatOut := obj["completion_tokens"]
	_, responses := obj["input_tokens_details"]
	switch {
	case chat || chatOut:
		a.openai(obj, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
	case responses:
		a.openai(obj, "input_tokens", "output_tokens", "input_tokens_details")
	default:
		in, ok := field(obj, "input_tokens")
		a.put(0, in, ok)
		out, ok := field(obj, "output_tokens")
		a.put(1, out, ok)
		cr, ok := field(obj, "cache_read_input_tokens")
		a.put(2, cr, ok)
		cw, ok := field(obj, "cache_creation_input_tokens")
		a.put(3, cw, ok)
	}
}

func (a *acc) openai(obj map[string]json.RawMessage, inKey, outKey, details string) {
	in, inOK := field(obj, inKey)
	cached, cOK := field(obj, details, "cached_tokens")
	if cOK && inOK {
		cached = min(cached, in)
		in -= cached
	}
	a.put(0, in, inOK)
	a.put(2, cached, cOK)
	out, ok := field(obj, outKey)
	a.put(1, out, ok)
}

// gemini reads a usageMetadata object: promptTokenCount includes the
// cached tokens; the output is the candidates plus the thoughts.
func (a *acc) gemini(obj map[string]json.RawMessage) {
	in, inOK := field(obj, "promptTokenCount")
	cached, cOK := field(obj, "cachedContentTokenCount")
	if cOK && inOK {
		cached = min(cached, in)
		in -= cached
	}
	a.put(0, in, inOK)
	a.put(2, cached, cOK)
	cand, candOK := field(obj, "candidatesTokenCount")
	thoughts, tOK := field(obj, "thoughtsTokenCount")
	a.put(1, cand+thoughts, candOK || tOK)
}
