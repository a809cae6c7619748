package orchestrator

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// TestLandRecordOfAnEarlierDaemonMovesIntoTheStateFile: a swarm recorded
// by a daemon that kept its land's record in land.json beside the
// journals shows that record after an upgrade (a land that said it ran is
// cut short), the state file's land section holds it from then on, and
// the old file is gone.
func TestLandRecordOfAnEarlierDaemonMovesIntoTheStateFile(t *testing.T) {
	repo := t.TempDir()
	store := state.Open(repo)
	id := "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
	now := time.Now().UTC()
	if err := store.Save(t.Context(), &state.Swarm{SwarmID: id, CreatedAt: now, UpdatedAt: now, Containers: []*state.Container{}}); err != nil {
		t.Fatal(err)
	}
	old := api.LandReport{RepoPath: repo, Branch: "aimi/land/6f1c2a3b", Onto: "main", OntoCommit: "abc", Running: true, Updated: now,
		Results: []api.LandResult{{Container: "aimi-a", TaskFile: "a.json", Branch: "feat/a", Outcome: "landed", Tip: "t1", Merge: "m1", Verify: "passed"},
			{Container: "aimi-b", TaskFile: "b.json", Branch: "feat/b", Outcome: "held", Reason: "conflicts", Tip: "t2", Files: []string{"x.txt"}}},
		Skipped: []api.Kept{{Name: "aimi-c", Reason: "failed, not completed"}}}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(store.SwarmJournals(id), legacyLandRecordFile)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, b, 0o644); err != nil {
		t.Fatal(err)
	}
	newSwarm := func() *swarm {
		return &swarm{m: &Manager{log: testLogger(t)}, id: id, repo: repo, store: store}
	}
	for i, sw := range []*swarm{newSwarm(), newSwarm()} { // the upgrade, then a restart
		rep := sw.landView()
		if rep == nil || !rep.Cut || rep.Running || len(rep.Results) != 2 || rep.Results[0].Merge != "m1" || rep.Results[1].Reason != "conflicts" ||
			len(rep.Skipped) != 1 || rep.OntoCommit != "abc" {
			t.Fatalf("read %d: %+v", i, rep)
		}
		if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("read %d: the old record is still there: %v", i, err)
		}
		st, err := store.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Land == nil || len(st.Land.Results) != 2 || st.Land.Results[0].Verify != "passed" || st.Land.Onto != "main" {
			t.Fatalf("read %d: the state file's land section: %+v", i, st.Land)
		}
	}
}
