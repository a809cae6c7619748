package board

import (
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

func TestSummarizeShowsAModelCallAsUsage(t *testing.T) {
	rec := state.Record{Seq: 4, Stream: state.StreamDaemon, Type: "usage",
		Usage: &usage.Call{Provider: "anthropic", Status: 200, Usage: usage.Usage{Input: 10, Output: 20, CacheRead: 5}, Cost: 0.5}}
	l := summarize(rec)
	if l.Kind != "usage" || !strings.Contains(l.Text, "anthropic 200: 10 in, 20 out, 5 cache read") || !strings.Contains(l.Text, "cost 0.5000") {
		t.Fatalf("summarized as %+v", l)
	}
}
