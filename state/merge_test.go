package state

import (
	"context"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// TestRecorderSaveKeepsWhatAnotherToolOwns edits the file between the
// Recorder's saves as the shell tool does, and checks which edits survive
// (see merge.go).
func TestRecorderSaveKeepsWhatAnotherToolOwns(t *testing.T) {
	ctx := context.Background()
	rec, st := newTestRecorder(t, t.TempDir(), 1, "done", "busy", "asked")
	send := func(name string, i int, m acpmsg.Message) {
		t.Helper()
		m.ContainerID = "" // the test containers have ids of their own
		if err := recordMsg(t, rec, name, i, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	send("done", 1, progress(1, "US-001", tasks.InProgress))
	send("done", 2, progress(2, "US-001", tasks.Completed))
	send("done", 3, completion(3, "completed", nil))
	send("busy", 1, progress(1, "US-001", tasks.InProgress))
	send("asked", 1, progress(1, "US-001", tasks.InProgress))
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pr := "https://github.com/org/repo/pull/9"
	if err := st.Update(ctx, func(s *Swarm) error {
		s.Container("done").PRURL = &pr
		s.Container("done").BranchName = "feat/renamed" // a field of an entry the daemon does not change now
		s.Container("asked").Status = StatusStopped
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The daemon goes on: busy progresses, asked too (until it is stopped),
	// and done gets an acpPid update (an entry the daemon changes).
	send("busy", 2, progress(2, "US-001", tasks.Completed))
	send("asked", 2, progress(2, "US-001", tasks.Completed))
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sw, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := sw.Container("done"); c.PRURL == nil || *c.PRURL != pr || c.BranchName != "feat/renamed" {
		t.Errorf("done, unchanged by the daemon: prUrl %v branch %s, want the other tool's", c.PRURL, c.BranchName)
	}
	if c := sw.Container("busy"); c.StoryProgress.Completed != 1 {
		t.Errorf("busy: %+v, want the daemon's progress", c.StoryProgress)
	}
	if c := sw.Container("asked"); c.Status != StatusStopped || c.StoryProgress.Completed != 1 {
		t.Errorf("asked: %s %+v, want stopped kept with the daemon's progress", c.Status, c.StoryProgress)
	}
	if err := rec.UpdateContainer("done", func(c *Container) { c.ACPPID = nil }); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sw, _ = st.Load(ctx)
	if c := sw.Container("done"); c.PRURL == nil || *c.PRURL != pr {
		t.Errorf("done, changed by the daemon without a prUrl of its own: prUrl %v, want %s", c.PRURL, pr)
	}
}
