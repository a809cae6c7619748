package usage

import (
	"strings"
	"testing"
)

const anthropicSSE = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the \"usage\": {\"input_tokens\": 999} is text"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`

const openaiSSE = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}

data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100}}}

data: [DONE]

`

const geminiSSE = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":2}}\r\n\r\n" +
	"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}],\"usageMetadata\":{\"promptTokenCount\":50,\"cachedContentTokenCount\":20,\"candidatesTokenCount\":9,\"thoughtsTokenCount\":4}}\r\n\r\n"

func TestParseProvidersAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string
		want              Usage
	}{
		{"anthropic json", "application/json", `{"id":"msg_1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":7}}}`,
			Usage{Input: 10, Output: 20, CacheRead: 5, CacheWrite: 7}},
		{"anthropic sse", "text/event-stream; charset=utf-8", anthropicSSE, Usage{Input: 25, Output: 15, CacheRead: 2000, CacheWrite: 100}},
		{"openai chat json", "application/json", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`,
			Usage{Input: 10, Output: 3, CacheRead: 2}},
		{"openai chat sse, usage in the last chunk", "text/event-stream", openaiSSE, Usage{Input: 20, Output: 30, CacheRead: 100}},
		{"openai responses sse", "text/event-stream", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":40,\"input_tokens_details\":{\"cached_tokens\":8},\"output_tokens\":6,\"output_tokens_details\":{\"reasoning_tokens\":2}}}}\n\n",
			Usage{Input: 32, Output: 6, CacheRead: 8}},
		{"gemini json", "application/json", `{"candidates":[],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":5,"totalTokenCount":13}}`, Usage{Input: 8, Output: 5}},
		{"gemini json array stream", "application/json", `[{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":1}},{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":6}}]`, Usage{Input: 8, Output: 6}},
		{"gemini sse", "text/event-stream", geminiSSE, Usage{Input: 30, Output: 13, CacheRead: 20}},
		{"wrong types are absent", "application/json", `{"usage":{"input_tokens":"10","output_tokens":-3,"cache_read_input_tokens":1.5,"cache_creation_input_tokens":[1]}}`, Usage{}},
		{"usage not an object", "application/json", `{"usage":[1,2],"x":{"usage":"a"},"usageMetadata":null}`, Usage{}},
		{"an error answer", "application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, Usage{}},
		{"a cut stream counts what arrived", "text/event-stream", anthropicSSE[:strings.Index(anthropicSSE, "event: message_delta")+40], Usage{Input: 25, Output: 1, CacheRead: 2000, CacheWrite: 100}},
		{"a cut json body counts the usage before the cut", "application/json", `{"usage":{"input_tokens":10,"output_tokens":20},"content":[{"type":"text","text":"cut he`, Usage{Input: 10, Output: 20}},
		{"the last sse line without a newline", "text/event-stream", "data: {\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}", Usage{Input: 3, Output: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse(tc.ctype, []byte(tc.body)); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// The same, one byte at a time, as a stream arrives.
			m := NewMeter(tc.ctype)
			for i := range len(tc.body) {
				m.Write([]byte{tc.body[i]})
			}
			if got := m.Usage(); got != tc.want {
				t.Fatalf("byte by byte: got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMeterBoundsWhatItHolds(t *testing.T) {
	m := NewMeter("text/event-stream")
	m.Write([]byte("data: {\"text\":\"" + strings.Repeat("x", 3*maxLineBytes)))
	m.Write([]byte("\"}\ndata: {\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}\n"))
	if cap(m.line) > 2*maxLineBytes {
		t.Errorf("line buffer grew to %d", cap(m.line))
	}
	if got := m.Usage(); got != (Usage{Input: 1, Output: 2}) {
		t.Fatalf("after a long line: %+v", got)
	}
	j := NewMeter("application/json")
	j.Write([]byte(`{"content":"` + strings.Repeat("y", maxHeadBytes+3*maxTailBytes)))
	j.Write([]byte(`","usage":{"input_tokens":5,"output_tokens":6}}`))
	if len(j.head) > maxHeadBytes || len(j.tail) > 2*maxTailBytes {
		t.Errorf("kept %d + %d bytes", len(j.head), len(j.tail))
	}
	if got := j.Usage(); got != (Usage{Input: 5, Output: 6}) {
		t.Fatalf("usage after a large body: %+v", got)
	}
}

func TestCostAndPrices(t *testing.T) {
	p := DefaultPrices()["anthropic"]
	got := p.Cost(Usage{Input: 1_000_000, Output: 100_000, CacheRead: 1_000_000, CacheWrite: 0})
	if want := 3 + 1.5 + 0.3; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	if err := (Prices{Input: -1}).Check(); err == nil {
		t.Fatal("a negative price passed")
	}
	for name, p := range DefaultPrices() {
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
