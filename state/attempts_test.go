package state

import (
	"os"
	"strings"
	"testing"
)

// TestAttemptsSectionIsAdditiveAndSurvivesTheRecorder: the attempts
// section is written beside the schema's members, validates against the
// schema, reads back, and the Recorder's later saves (which rewrite the
// containers only) keep it.
func TestAttemptsSectionIsAdditiveAndSurvivesTheRecorder(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	store := Open(root)
	sw := newTestSwarm("a1", "a2")
	rec := NewRecorder(store, sw.Clone(), RecorderOptions{})
	for _, c := range sw.Containers {
		if err := rec.Track(c.Clone(), NewTracker(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	score := 0.91
	set := &AttemptSet{TaskFilePath: ".aimi/tasks/x-tasks.json", BranchName: "feat/x", Stop: "all", Attempts: []Attempt{
		{Attempt: 1, ContainerName: "a1", BranchName: "feat/x--a1"},
		{Attempt: 2, ContainerName: "a2", BranchName: "feat/x--a2", Qualified: true, Score: &score, Lines: ptr(1204), Tip: "0123456789abcdef0123456789abcdef01234567"}},
		Pick: &AttemptPick{Attempt: 2, ContainerName: "a2", Reason: "verified; the only one of 2", By: PickByDaemon, At: t0}}
	if err := store.Update(ctx, func(s *Swarm) error { s.PutAttemptSet(set); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := rec.UpdateContainer("a1", func(c *Container) { c.ACPPID = ptr(42) }); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := validateState(compileSchema(t), b); err != nil {
		t.Fatalf("the file with an attempts section breaks the schema: %v\n%s", err, b)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	back := got.AttemptSet(set.TaskFilePath)
	if back == nil || back.Pick == nil || back.Pick.ContainerName != "a2" || *back.Attempts[1].Score != score || got.Container("a1").ACPPID == nil {
		t.Fatalf("after a Recorder save: %+v\n%s", back, b)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A wrong value in the section is an error naming it, as elsewhere.
	bad := strings.Replace(string(b), `"attempts": [`, `"attempts": 7, "x": [`, 1)
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("a bad attempts member: %v", err)
	}
}
