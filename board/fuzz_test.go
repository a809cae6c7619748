package board

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/state"
)

// FuzzSummarize: whatever a container wrote (raw line, message, reason),
// the line the page gets is valid UTF-8, free of control and bidi
// characters, and bounded.
func FuzzSummarize(f *testing.F) {
	f.Add("stdout", true, []byte(`{"type":"progress-update","payload":{"storyId":"US-001","status":"completed","output":"ok"}}`), "", "")
	f.Add("stdout", true, []byte(`{"type":"error","payload":{"code":"AGENT_CRASH","message":"boom\u001b[2J"}}`), "", "")
	f.Add("stderr", false, []byte(nil), "level=INFO msg=\"clone\"", "stderr: log output")
	f.Add("stdout", false, []byte(nil), "\xff\xfe not utf8", "invalid JSON")
	f.Fuzz(func(t *testing.T, stream string, valid bool, msg []byte, raw, reason string) {
		rec := state.Record{Seq: 1, Stream: stream, Valid: valid, Message: msg, Reason: reason, Rejected: reason}
		rec.SetRaw([]byte(raw))
		l := summarize(rec)
		for _, s := range []string{l.Text, l.Note, l.Code, l.Type} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 %q", s)
			}
			if utf8.RuneCountInString(s) > maxText+1 {
				t.Fatalf("%d runes, over the bound", utf8.RuneCountInString(s))
			}
			for _, r := range s {
				if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
					t.Fatalf("control or bidi character %U in %q", r, s)
				}
			}
		}
	})
}
