package orchestrator

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// A chatty runner's stderr is most of what a journal holds. Its records
// carry the line, its cursor and stream and when it was journaled, and not
// much else: 85 MB of such output once became a 282 MB journal.
func TestJournalOfStderrOutputStaysCloseToItsSize(t *testing.T) {
	ctx := context.Background()
	store := state.Open(t.TempDir())
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	l := newLedger(store, &state.Swarm{SwarmID: "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", CreatedAt: now, UpdatedAt: now}, state.RecorderOptions{Logger: testLogger(t)})
	t.Cleanup(func() { l.close(ctx) })
	tf := &tasks.File{SchemaVersion: tasks.SchemaVersion, UserStories: []tasks.Story{{ID: "US-001", Priority: 1, Status: tasks.Pending}}}
	c := &state.Container{ContainerID: "abc000abc000", ContainerName: "aimi-swarm-chatty", TaskFilePath: ".aimi/tasks/chatty.json",
		BranchName: "feat/chatty", Status: state.StatusPending, CreatedAt: now, UpdatedAt: now}
	if err := l.track(c, state.NewTracker(tf)); err != nil {
		t.Fatal(err)
	}
	const lines = 2000
	output := 0
	for i := range lines {
		// 85 bytes, as the lines of the flood that was measured.
		data := fmt.Appendf(nil, "npm http fetch GET 200 https://registry.npmjs.org/some-package/-/pkg-%06d.tgz 12ms", i)
		output += len(data) + 1
		ln := engine.Line{Cursor: logcursor.Cursor{Time: now.Add(time.Duration(i) * time.Microsecond)}, Stream: engine.Stderr, Data: data, Size: len(data)}
		if _, err := l.line(ctx, c.ContainerName, ln); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.flush(ctx); err != nil {
		t.Fatal(err)
	}
	path := store.JournalPath(contract.Sandbox{Swarm: "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", Container: c.ContainerName})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("journal %.2f times its output", float64(fi.Size())/float64(output))
	if ratio := float64(fi.Size()) / float64(output); ratio > 2.6 {
		t.Fatalf("journal is %.2f times its output (%d of %d bytes), want at most 2.6", ratio, fi.Size(), output)
	}
	recs, err := state.ReadJournal(path)
	if err != nil || len(recs) != lines || recs[0].Stream != state.StreamStderr || recs[0].Valid {
		t.Fatalf("journal reads back as %d records (%v), want %d stderr lines", len(recs), err, lines)
	}
}
