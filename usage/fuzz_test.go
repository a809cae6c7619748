package usage

import "testing"

func FuzzMeter(f *testing.F) {
	for _, s := range []string{anthropicSSE, openaiSSE, geminiSSE,
		`{"usage":{"input_tokens":10,"output_tokens":20}}`,
		`[{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":1}}]`,
		`{"usage":{"prompt_tokens":1e400,"completion_tokens":{"a":1}}}`,
		`data: {"usage":{"input_tokens":3`} {
		f.Add(s, true, 7)
		f.Add(s, false, 1)
	}
	f.Fuzz(func(t *testing.T, body string, sse bool, step int) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		want := Parse(ct, []byte(body))
		if want.Input < 0 || want.Output < 0 || want.CacheRead < 0 || want.CacheWrite < 0 {
			t.Fatalf("negative count %+v", want)
		}
		if step <= 0 || step > 64 {
			step = 1
		}
		m := NewMeter(ct)
		for i := 0; i < len(body); i += step {
			m.Write([]byte(body[i:min(i+step, len(body))]))
		}
		if got := m.Usage(); got != want && len(body) < maxLineBytes {
			t.Fatalf("in chunks of %d: %+v, whole: %+v", step, got, want)
		}
	})
}
