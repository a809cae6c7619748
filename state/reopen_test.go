package state

import (
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// TestAFoldStartsWithTheSkipsARunReopens: a task file as a run left it
// (US-002 failed, US-003 skipped behind it) is what a rerun starts from; the
// rerun's runner reopens US-003 and retries US-002, so its fold must take
// both reports and end completed without failures.
func TestAFoldStartsWithTheSkipsARunReopens(t *testing.T) {
	tf := taskFile(tasks.Completed, tasks.Failed, tasks.Skipped, tasks.Skipped)
	tf.UserStories[1].DependsOn = []string{"US-001"}
	tf.UserStories[2].DependsOn = []string{"US-002"}
	tr := NewTracker(tf) // US-004 was skipped by hand: it depends on nothing failed
	if p := tr.Progress(); p != (Progress{Total: 4, Completed: 1, Failed: 1, Pending: 1}) {
		t.Fatalf("start: %+v; want US-003 pending, US-004 skipped", p)
	}
	for i, m := range []acpmsg.Message{progress(1, "US-002", tasks.InProgress), progress(2, "US-002", tasks.Completed),
		progress(3, "US-003", tasks.InProgress), progress(4, "US-003", tasks.Completed), completion(5, "completed", nil)} {
		if err := tr.Apply(m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	c := &Container{}
	tr.CopyTo(c)
	if c.Status != StatusCompleted || c.StoryProgress != (Progress{Total: 4, Completed: 3}) {
		t.Fatalf("end: %s %+v", c.Status, c.StoryProgress)
	}
}
