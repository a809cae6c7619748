package state

import (
	"os"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// TestLandSectionSurvivesTheRecorderAndKeepsItsProgress: the land section
// is written beside the schema's members and validates against the
// schema; a container's progress saved by the Recorder after it keeps it
// (neither dropped nor rolled back to an older record), and a land write
// after the progress keeps the progress.
func TestLandSectionSurvivesTheRecorderAndKeepsItsProgress(t *testing.T) {
	ctx := t.Context()
	store := Open(t.TempDir())
	sw := newTestSwarm("a", "b")
	rec := NewRecorder(store, sw.Clone(), RecorderOptions{})
	for _, c := range sw.Containers {
		if err := rec.Track(c.Clone(), NewTracker(pendingFile(2))); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(l *Land) {
		t.Helper()
		if err := store.Update(ctx, func(s *Swarm) error { s.Land = l.Clone(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	merge := "0123456789abcdef0123456789abcdef01234567"
	l := &Land{Branch: "aimi/land/6f1c2a3b", Onto: "main", OntoCommit: "fedcba", Running: true, Updated: t0,
		Results: []LandResult{{Container: "a", TaskFile: "t-a.json", Branch: "feat/a", Outcome: "landed", Tip: "aaa", Merge: merge, Verify: "passed"}}}
	put(l)
	// Progress after the land's first record: the Recorder's save keeps it.
	if err := rec.Record(ctx, "b", Record{Stream: StreamStdout}, ptr(anyContainer(progress(1, storyID(0), tasks.InProgress)))); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := loadValid(t, store)
	if got.Land == nil || len(got.Land.Results) != 1 || got.Land.Results[0].Merge != merge || got.Container("b").StoryProgress.InProgress != 1 {
		t.Fatalf("after a progress save: land %+v, b %+v", got.Land, got.Container("b"))
	}
	// The land goes on: its later record is not rolled back by the
	// Recorder's next save, and does not roll back the progress.
	l.Results = append(l.Results, LandResult{Container: "b", TaskFile: "t-b.json", Branch: "feat/b", Outcome: "held", Reason: "conflicts with a", Tip: "bbb", Files: []string{"x.txt"}})
	l.Running = false
	put(l)
	if err := rec.Record(ctx, "a", Record{Stream: StreamStdout}, ptr(anyContainer(progress(2, storyID(0), tasks.InProgress)))); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got = loadValid(t, store)
	if got.Land == nil || got.Land.Running || len(got.Land.Results) != 2 || got.Land.Results[1].Reason != "conflicts with a" ||
		got.Container("a").StoryProgress.InProgress != 1 || got.Container("b").StoryProgress.InProgress != 1 {
		t.Fatalf("after a land write and a progress save: land %+v, a %+v, b %+v", got.Land, got.Container("a"), got.Container("b"))
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(b); err != nil {
		t.Errorf("CheckFile refuses a file with a land section: %v", err)
	}
	bad := strings.Replace(string(b), `"land": {`, `"land": 7, "x": {`, 1)
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "land") {
		t.Errorf("a bad land member: %v", err)
	}
}

// anyContainer is m without a container id (the helpers' id is a's).
func anyContainer(m acpmsg.Message) acpmsg.Message {
	m.ContainerID = ""
	return m
}

// loadValid reads the store's file, checks it against the schema and
// decodes it.
func loadValid(t *testing.T, store *Store) *Swarm {
	t.Helper()
	b, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := validateState(compileSchema(t), b); err != nil {
		t.Fatalf("the file breaks the schema: %v\n%s", err, b)
	}
	sw, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}
