package budget

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// After a restart the budgets read back what the swarm's journals hold
// from before the daemon started: every container's, a rerun's earlier
// journal included; calls after the start, and other records, are not
// read (the meter counts those).
func TestJournaledSpendReadsEarlierCallsOfEveryJournal(t *testing.T) {
	repo := t.TempDir()
	const id = "7c0e1d52-8f7b-4c1e-9a35-1f2d3e4c5b6a"
	start := time.Now()
	write := func(file string, recs ...state.Record) {
		p := filepath.Join(state.Open(repo).SwarmJournals(id), file)
		os.MkdirAll(filepath.Dir(p), 0o755)
		var b []byte
		for i, r := range recs {
			r.Seq = int64(i + 1)
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			b = append(append(b, line...), '\n')
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	call := func(at time.Time, cost float64) state.Record {
		return state.Record{Stream: state.StreamDaemon, Type: "usage", Time: at, Usage: &usage.Call{Provider: "anthropic", Status: 200, Cost: cost}}
	}
	write("aimi-a.ndjson", call(start.Add(-time.Hour), 1.5), state.Record{Stream: state.StreamStdout, Time: start.Add(-time.Hour)}, call(start.Add(time.Second), 99))
	write("aimi-a.ndjson.run-20261126T010000.000000000Z", call(start.Add(-2*time.Hour), 0.25))
	write("aimi-b.ndjson", call(start.Add(-time.Minute), 2))
	spent, err := JournaledSpend(context.Background(), repo, id, start)
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]float64{}
	for _, s := range spent {
		sum[s.Container] += s.Cost
	}
	if len(spent) != 3 || sum["aimi-a"] != 1.75 || sum["aimi-b"] != 2 {
		t.Fatalf("spent %+v, want aimi-a 1.75 (two journals) and aimi-b 2", spent)
	}
	if none, err := JournaledSpend(context.Background(), repo, "00000000-0000-4000-8000-000000000000", start); err != nil || len(none) != 0 {
		t.Fatalf("a swarm without journals: %v %v", none, err)
	}
}
