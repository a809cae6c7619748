package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/state"
)

func TestFormatRecordShowsWhatTheJournalCapLeftOut(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  state.Record
		want string
	}{
		{
			"gap record",
			state.Record{Time: at, Stream: state.StreamDaemon, Omitted: &state.Omission{Lines: 12, Bytes: 3400},
				Reason: "12 lines (3400 bytes) of output not journaled: the journal is at its cap"},
			"2026-11-23 10:00:00  journal-cap      -         -            12 lines (3400 bytes) of output not journaled: the journal is at its cap",
		},
		{
			"git refusal",
			state.Record{Time: at, Stream: state.StreamDaemon, Type: state.TypeGitRefused,
				Reason: "a push to refs/heads/main was refused: this container may push only refs/heads/feat/x"},
			"2026-11-23 10:00:00  daemon:git-refused  -         refused      a push to refs/heads/main was refused: this container may push only refs/heads/feat/x",
		},
		{
			"stderr line",
			state.Record{Time: at, Stream: state.StreamStderr, Raw: "npm WARN deprecated"},
			"2026-11-23 10:00:00  stderr           -         -            npm WARN deprecated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatRecord(tt.rec); strings.TrimRight(got, " ") != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
