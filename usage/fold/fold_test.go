package fold

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

func TestFoldAttributesCallsByTimeAndNeverCountsTwice(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	progress := func(s int, story, status, output string) state.Record {
		m := acpmsg.NewMessage(acpmsg.TypeProgressUpdate, "00000000-0000-4000-8000-000000000000", "c", &acpmsg.ProgressUpdate{StoryID: story, Status: status, Output: output})
		b, _ := json.Marshal(m)
		// Journaled late (the engine's log), written at s (its cursor).
		return state.Record{Stream: state.StreamStdout, Valid: true, Type: string(acpmsg.TypeProgressUpdate), Message: b,
			Time: at(s + 30), Cursor: logcursor.Cursor{Time: at(s)}}
	}
	call := func(s int, in int64) state.Record {
		return state.Record{Stream: state.StreamDaemon, Type: "usage", Time: at(s), Usage: &usage.Call{Provider: "anthropic", Status: 200, Usage: usage.Usage{Input: in}, Cost: float64(in)}}
	}
	f := New()
	for _, r := range []state.Record{
		call(2, 1), // journaled before the story's start line reached the journal
		progress(1, "US-001", acpmsg.StoryInProgress, "start"),
		call(3, 2),
		progress(10, "US-001", acpmsg.StoryCompleted, usage.FormatAgentCost(usage.AgentCost{Amount: 9, Currency: "USD"})+" done"),
		progress(11, "US-002", acpmsg.StoryInProgress, "start"),
		progress(12, "US-003", acpmsg.StoryInProgress, "start"),
		call(13, 4), // two stories at once: no single story
		progress(14, "US-003", acpmsg.StoryCompleted, usage.FormatAgentCost(usage.AgentCost{Amount: 0.5, Currency: "USD"})+" done"),
		progress(15, "US-002", acpmsg.StoryFailed, usage.FormatAgentCost(usage.AgentCost{Amount: 2, Currency: "EUR"})+" failed"),
	} {
		f.Add(r)
	}
	cu := f.Result("c")
	got := map[string]Totals{}
	for _, s := range cu.Stories {
		got[s.Story] = s.Totals
	}
	if g := got["US-001"]; g.Calls != 2 || g.Tokens.Input != 3 || g.Cost != 3 || g.AgentCost != nil {
		t.Errorf("US-001 (gateway calls; its agent's own cost not counted again): %+v", g)
	}
	if g := got[""]; g.Calls != 1 || g.Tokens.Input != 4 {
		t.Errorf("no single story: %+v", g)
	}
	if g := got["US-003"]; g.Calls != 0 || g.Cost != 0.5 || g.AgentCost["USD"] != 0.5 {
		t.Errorf("US-003 (agent-reported only): %+v", g)
	}
	if g := got["US-002"]; g.Cost != 0 || g.AgentCost["EUR"] != 2 {
		t.Errorf("US-002 (another currency, apart): %+v", g)
	}
	if cu.Calls != 3 || cu.Cost != 7.5 || cu.AgentCost["EUR"] != 2 {
		t.Errorf("container: %+v", cu.Totals)
	}
}

// TestFoldStartsAStoryWhenTheRunnerWroteIt: the engine stamps a line
// when it reads it, which on a loaded machine is after the agent's first
// model call began; the message's own timestamp (written by the runner
// before it started the agent) opens the story.
func TestFoldStartsAStoryWhenTheRunnerWroteIt(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	progress := func(written, read time.Time, status string) state.Record {
		m := acpmsg.NewMessage(acpmsg.TypeProgressUpdate, "00000000-0000-4000-8000-000000000000", "c", &acpmsg.ProgressUpdate{StoryID: "US-001", Status: status, Output: "x"})
		m.Timestamp = written.Format(acpmsg.TimestampLayout)
		b, _ := json.Marshal(m)
		return state.Record{Stream: state.StreamStdout, Valid: true, Type: string(acpmsg.TypeProgressUpdate), Message: b,
			Time: read, Cursor: logcursor.Cursor{Time: read}}
	}
	f := New()
	f.Add(progress(t0, t0.Add(800*time.Millisecond), acpmsg.StoryInProgress))
	f.Add(state.Record{Stream: state.StreamDaemon, Type: "usage", Time: t0.Add(100 * time.Millisecond), Usage: &usage.Call{Provider: "anthropic", Status: 200, Usage: usage.Usage{Input: 5}}})
	f.Add(progress(t0.Add(2*time.Second), t0.Add(2*time.Second), acpmsg.StoryCompleted))
	cu := f.Result("c")
	if len(cu.Stories) != 1 || cu.Stories[0].Story != "US-001" || cu.Stories[0].Calls != 1 {
		t.Fatalf("stories: %+v, want the call in US-001", cu.Stories)
	}
}

// TestFoldGoesOnAfterAResult: a Result while a story runs leaves the Fold
// as it was, so the daemon folds a journal's new records into the same
// Fold as they come.
func TestFoldGoesOnAfterAResult(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	progress := func(s int, story, status string) state.Record {
		m := acpmsg.NewMessage(acpmsg.TypeProgressUpdate, "00000000-0000-4000-8000-000000000000", "c", &acpmsg.ProgressUpdate{StoryID: story, Status: status, Output: "x"})
		b, _ := json.Marshal(m)
		at := t0.Add(time.Duration(s) * time.Second)
		return state.Record{Stream: state.StreamStdout, Valid: true, Type: string(acpmsg.TypeProgressUpdate), Message: b, Time: at, Cursor: logcursor.Cursor{Time: at}}
	}
	call := func(s int) state.Record {
		return state.Record{Stream: state.StreamDaemon, Type: "usage", Time: t0.Add(time.Duration(s) * time.Second), Usage: &usage.Call{Provider: "anthropic", Status: 200, Cost: 1}}
	}
	f := New()
	f.Add(progress(1, "US-001", acpmsg.StoryInProgress))
	f.Add(call(2))
	if cu := f.Result("c"); cu.Cost != 1 || len(cu.Stories) != 1 || cu.Stories[0].Story != "US-001" {
		t.Fatalf("while US-001 runs: %+v", cu)
	}
	f.Add(progress(3, "US-001", acpmsg.StoryCompleted))
	f.Add(progress(4, "US-002", acpmsg.StoryInProgress))
	f.Add(call(5))
	cu := f.Result("c")
	if cu.Cost != 2 || len(cu.Stories) != 2 || cu.Stories[0].Calls != 1 || cu.Stories[1].Story != "US-002" || cu.Stories[1].Calls != 1 {
		t.Fatalf("after US-002's call: %+v", cu)
	}
}
