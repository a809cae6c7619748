package state

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// endlessStream is a valid stream of any length: stories cycle through
// in_progress and failed (a retry loop), so every message changes state.
func endlessStream(n, stories int) []acpmsg.Message {
	out := make([]acpmsg.Message, n)
	for i := range out {
		st := tasks.InProgress
		if (i/stories)%2 == 1 {
			st = tasks.Failed
		}
		out[i] = progress(i, storyID(i%stories), st)
	}
	return out
}

// BenchmarkFold is the in-memory fold: Tracker.Apply per message.
func BenchmarkFold(b *testing.B) {
	msgs := endlessStream(4096, 64)
	tr := NewTracker(pendingFile(64))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := tr.Apply(msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkRecorder is journal + state on disk with group commit: Record
// per message from several containers at once, then Flush. It reports
// journaled messages/s, how far the state file trailed the newest change
// (max and mean, ms; target: 50 ms) and messages per group commit.
func BenchmarkRecorder(b *testing.B) {
	for _, containers := range []int{1, 8} {
		b.Run(fmt.Sprintf("containers=%d", containers), func(b *testing.B) {
			ctx := context.Background()
			rec := NewRecorder(Open(b.TempDir()), newTestSwarm(), RecorderOptions{})
			defer rec.Close(ctx)
			names := make([]string, containers)
			for i := range names {
				names[i] = fmt.Sprintf("c%d", i)
				c := newTestContainer(0, names[i])
				if err := rec.Track(c, NewTracker(pendingFile(64))); err != nil {
					b.Fatal(err)
				}
			}
			msgs := endlessStream(4096, 64)
			done := make(chan error, containers)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for ci, name := range names {
				go func() {
					for i := ci; i < b.N; i += containers {
						m := msgs[i%len(msgs)]
						if err := rec.Record(ctx, name, Record{Cursor: cursor(i), Stream: StreamStdout}, &m); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
			}
			for range containers {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			if err := rec.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			reportRecorder(b, rec.Stats(), elapsed)
		})
	}
}

// reportRecorder reports the rate of b.N records in elapsed and, from the
// recorder's stats, how far the state file trailed and the batch size.
func reportRecorder(b *testing.B, s RecorderStats, elapsed time.Duration) {
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(s.MaxStateLag.Microseconds())/1000, "max-state-lag-ms")
	if s.StateSaves > 0 {
		b.ReportMetric(float64(s.SumStateLag.Microseconds())/1000/float64(s.StateSaves), "mean-state-lag-ms")
	}
	if s.Batches > 0 {
		b.ReportMetric(float64(s.Records)/float64(s.Batches), "msgs/batch")
	}
}

// BenchmarkRecorderSustained paces messages over 8 containers and reports
// the journaled rate and how far the state file trails (targets: at least
// 20,000 msgs/s with the state at most 50 ms behind). It offers 10% more
// than the target rate: a paced benchmark can only measure at or just under
// what it offers (the final flush is inside the timing), so offering exactly
// 20,000/s would read as a miss even when the recorder keeps up.
func BenchmarkRecorderSustained(b *testing.B) {
	const rate, containers, tick = 22_000, 8, time.Millisecond
	ctx := context.Background()
	var lags []time.Duration // appended by the saver goroutine only
	rec := NewRecorder(Open(b.TempDir()), newTestSwarm(), RecorderOptions{OnSave: func(d time.Duration) { lags = append(lags, d) }})
	defer rec.Close(ctx)
	names := make([]string, containers)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
		if err := rec.Track(newTestContainer(0, names[i]), NewTracker(pendingFile(64))); err != nil {
			b.Fatal(err)
		}
	}
	msgs := endlessStream(4096, 64)
	perTick := rate * int(tick) / int(time.Second)
	b.ResetTimer()
	start := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	sent := 0
	for sent < b.N {
		<-t.C
		// catch up to the schedule, so a late tick does not lower the rate
		due := min(b.N, int(time.Since(start)/tick+1)*perTick)
		for ; sent < due; sent++ {
			m := msgs[sent%len(msgs)]
			if err := rec.Record(ctx, names[sent%containers], Record{Cursor: cursor(sent), Stream: StreamStdout}, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := rec.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportRecorder(b, rec.Stats(), elapsed)
	rec.Close(ctx) // the saver is done: lags may be read
	if len(lags) > 0 {
		slices.Sort(lags)
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-state-lag-ms")
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-state-lag-ms")
	}
}

// BenchmarkStoreUpdate is one locked load-modify-save of an 8-container
// state: the cost a coalesced save adds to every batch.
func BenchmarkStoreUpdate(b *testing.B) {
	ctx := context.Background()
	st := Open(b.TempDir())
	if err := st.Save(ctx, newTestSwarm("c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		err := st.Update(ctx, func(s *Swarm) error { s.Containers[i%8].StoryProgress.Completed = i % 100; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}
