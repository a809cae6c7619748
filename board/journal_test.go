package board

import (
	"testing"

	"github.com/aimi-tools/swarm/state"
)

func TestSummarizeShowsAGapRecordAsAGap(t *testing.T) {
	rec := state.Record{Seq: 9, Stream: state.StreamDaemon, Omitted: &state.Omission{Lines: 3, Bytes: 200},
		Reason: "3 lines (200 bytes) of output not journaled: the journal is at its cap"}
	l := summarize(rec)
	if l.Kind != "gap" || l.Text != rec.Reason || l.Note != "" {
		t.Fatalf("summarized as %+v, want kind gap with the reason as text", l)
	}
}
