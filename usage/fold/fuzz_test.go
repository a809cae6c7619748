package fold

import (
	"math"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// FuzzFold: a container writes its journal's progress lines, and the
// daemon folds them into the costs it shows; whatever they hold, the fold
// neither panics nor makes a cost out of nothing but the runner's cost
// sentence (finite, never negative).
func FuzzFold(f *testing.F) {
	f.Add([]byte(`{"timestamp":"2026-11-25T22:00:00Z","payload":{"storyId":"US-001","status":"in_progress"}}`), []byte(`{"payload":{"storyId":"US-001","status":"completed","output":"Agent-reported cost: 1.5 USD. done"}}`), int64(3))
	f.Add([]byte(`{"payload":{"storyId":"","status":"completed"}}`), []byte(`not json`), int64(-1))
	f.Fuzz(func(t *testing.T, first, second []byte, secs int64) {
		t0 := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
		fo := New()
		for i, msg := range [][]byte{first, second} {
			fo.Add(state.Record{Stream: state.StreamStdout, Valid: true, Type: string(acpmsg.TypeProgressUpdate), Message: msg, Time: t0.Add(time.Duration(i) * time.Second)})
			fo.Add(state.Record{Stream: state.StreamDaemon, Type: "usage", Time: t0.Add(time.Duration(secs) * time.Millisecond), Usage: &usage.Call{Cost: 0.25}})
		}
		cu := fo.Result("c")
		if math.IsNaN(cu.Cost) || math.IsInf(cu.Cost, 0) || cu.Cost < 0.5 || cu.Calls != 2 {
			t.Fatalf("usage %+v", cu)
		}
		again := fo.Result("c")
		if again.Cost != cu.Cost || again.Calls != cu.Calls {
			t.Fatalf("a second Result %+v, the first %+v", again, cu)
		}
	})
}
