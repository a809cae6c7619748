package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/budget"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// After a restart the budgets read back what the swarm's journals hold
// from before the daemon started: every container's, a rerun's earlier
// journal included; calls after the start, and other records, are not
// read (the meter counts those).
//
// Not parallel: it reads files it writes itself, in milliseconds, with no
// engine or daemon to wait for; a slot would gain nothing.
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
	spent, err := journaledSpend(context.Background(), repo, id, start)
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
	if none, err := journaledSpend(context.Background(), repo, "00000000-0000-4000-8000-000000000000", start); err != nil || len(none) != 0 {
		t.Fatalf("a swarm without journals: %v %v", none, err)
	}
}

// The budgets are read from the configuration files at each question, but
// loaded again only when a file changed: every story of every container
// asks. A file changed in the last two seconds is read every time.
//
// Not parallel: it reads files it writes itself, in milliseconds, with no
// engine or daemon to wait for; a slot would gain nothing.
func TestBudgetLimitsAreReadAgainOnlyWhenAFileChanged(t *testing.T) {
	repo, home := t.TempDir(), t.TempDir()
	user := filepath.Join(home, "config.yaml")
	cfgPath := filepath.Join(repo, configs.RepoConfigPath)
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	write := func(p, body string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(user, "agent:\n  story_budget: 2\n", old)
	write(cfgPath, "swarm:\n  budget: 5\n", old)
	loads := 0
	load := func(o configs.LoadOptions) (*configs.Config, error) { loads++; return configs.Load(o) }
	global, err := configs.Load(configs.LoadOptions{UserConfigPath: "-", LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	limits := budgetLimits(global, configs.LoadOptions{UserConfigPath: user, LookupEnv: noEnv}, slog.New(slog.DiscardHandler), load)
	check := func(step string, want budget.Limits, wantLoads int) {
		t.Helper()
		if got := limits(repo); got != want || loads != wantLoads {
			t.Errorf("%s: %+v after %d loads, want %+v after %d", step, got, loads, want, wantLoads)
		}
	}
	check("first question", budget.Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	check("same files", budget.Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	write(cfgPath, "swarm:\n  budget: 7\n", old.Add(time.Minute))
	check("repository's file changed", budget.Limits{Swarm: 7, Story: 2, Grace: 0.1}, 2)
	write(user, "agent:\n  story_budget: 3\n", old.Add(2*time.Minute))
	check("user's file changed", budget.Limits{Swarm: 7, Story: 3, Grace: 0.1}, 3)
	write(cfgPath, "swarm:\n  budget: 6\n", time.Now())
	check("a file just written", budget.Limits{Swarm: 6, Story: 3, Grace: 0.1}, 4)
	check("a file just written, again", budget.Limits{Swarm: 6, Story: 3, Grace: 0.1}, 5)
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	check("repository's file gone", budget.Limits{Story: 3, Grace: 0.1}, 6)
	check("repository's file gone, again", budget.Limits{Story: 3, Grace: 0.1}, 6)
}

func noEnv(string) (string, bool) { return "", false }
