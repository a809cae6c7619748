package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// warmPhases are the moments of a claimed container's way to work, from
// its journal: the task-request journaled (the claim line was written just
// before it), the runner's "task-request accepted" (its git relay up),
// its "workspace ready" (the clone and the branch's checkout done), its
// first "story started" and its first in_progress update. The runner's own clock (its log line's time)
// is used where it has one: the daemon reads its output later.
var warmPhases = []string{"request", "accepted", "workspace", "story", "work"}

// phaseTimes is, for each of warmPhases, the time from start to that
// moment in each container of sw.
func phaseTimes(b testing.TB, repo string, sw *state.Swarm, start time.Time) map[string][]time.Duration {
	b.Helper()
	out := map[string][]time.Duration{}
	for _, c := range sw.Containers {
		recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		seen := map[string]bool{}
		mark := func(phase string, at time.Time) {
			if !seen[phase] {
				seen[phase] = true
				out[phase] = append(out[phase], at.Sub(start))
			}
		}
		for _, r := range recs {
			var m struct {
				Type    string `json:"type"`
				Payload struct {
					Status string `json:"status"`
				} `json:"payload"`
			}
			_ = json.Unmarshal(r.Message, &m)
			switch {
			case r.Stream == state.StreamDaemon && m.Type == "task-request":
				mark("request", r.Time)
			case r.Stream != state.StreamDaemon && m.Type == "progress-update" && m.Payload.Status == "in_progress":
				mark("work", r.Time)
			case strings.Contains(r.Raw, `msg="task-request accepted"`):
				mark("accepted", runnerTime(r))
			case strings.Contains(r.Raw, `msg="workspace ready"`):
				mark("workspace", runnerTime(r))
			case strings.Contains(r.Raw, `msg="story started"`):
				mark("story", runnerTime(r))
			case strings.Contains(r.Raw, `msg="image workspace brought to the tip"`):
				// Not a moment: how long the difference's apply took.
				for _, f := range strings.Fields(r.Raw) {
					if v, ok := strings.CutPrefix(f, "apply="); ok {
						if d, err := time.ParseDuration(v); err == nil {
							out["apply"] = append(out["apply"], d)
						}
					}
				}
			}
		}
	}
	return out
}

// runnerTime is the time= of a runner's log line, else when the daemon
// read it.
func runnerTime(r state.Record) time.Time {
	if v, ok := strings.CutPrefix(r.Raw, "time="); ok {
		v, _, _ = strings.Cut(v, " ")
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return r.Time
}

// reportPhases logs, for each phase, the median over rounds of the first
// and of the last container's moment (every container got that far), and
// reports the medians of the last as metrics s-warm-PHASE.
func reportPhases(b *testing.B, rounds []map[string][]time.Duration) {
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	for _, ph := range warmPhases {
		var first, last []time.Duration
		for _, r := range rounds {
			if d := r[ph]; len(d) > 0 {
				first = append(first, slices.Min(d))
				last = append(last, slices.Max(d))
			}
		}
		if len(last) == 0 {
			b.Logf("phase %s: not seen", ph)
			continue
		}
		b.Logf("phase %s: first container at %s, every container at %s (medians of %d rounds; the last's: %v)", ph,
			med(first).Round(time.Millisecond), med(last).Round(time.Millisecond), len(last), last)
		b.ReportMetric(med(last).Seconds(), "s-warm-"+ph)
	}
}

// logPhases logs, for each of warmPhases, when the first and the last
// container of one start got there.
func logPhases(b testing.TB, at map[string][]time.Duration) {
	b.Helper()
	var parts []string
	for _, ph := range warmPhases {
		if d := at[ph]; len(d) > 0 {
			parts = append(parts, ph+" "+slices.Min(d).Round(time.Millisecond).String()+"-"+slices.Max(d).Round(time.Millisecond).String())
		}
	}
	if d := at["apply"]; len(d) > 0 {
		parts = append(parts, "difference applied in "+slices.Min(d).Round(time.Millisecond).String()+"-"+slices.Max(d).Round(time.Millisecond).String())
	}
	b.Logf("phases (first-last container): %s", strings.Join(parts, ", "))
}
