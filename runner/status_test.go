package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/aimi-tools/swarm/tasks"
)

// A story stopped mid-run is put back to the status it had before it
// started, through the task file's transition table; a move the table
// forbids leaves the status alone and fails the run.
func TestStatusesMoveOnlyThroughTheTable(t *testing.T) {
	cases := []struct {
		name      string
		prev      tasks.Status
		wantFatal bool
	}{
		{"a pending story stopped mid-run is pending again", tasks.Pending, false},
		{"a failed story stopped during its retry is failed again", tasks.Failed, false},
		{"a leftover in_progress story stopped again stays in_progress", tasks.InProgress, false},
		{"a move the table forbids (in_progress -> skipped) fails the run", tasks.Skipped, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(t, linear)
			id := f.UserStories[0].ID
			f.UserStories[0].Status = tasks.InProgress
			r := &run{file: f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			r.finish(context.Background(), storyResult{id: id, status: tasks.InProgress, prev: tc.prev}, map[string]int{id: 0}, true)
			want := tc.prev
			if tc.wantFatal {
				want = tasks.InProgress
			}
			if got := f.UserStories[0].Status; got != want || r.fatal != tc.wantFatal {
				t.Fatalf("status %s fatal %v, want %s fatal %v (errors %v)", got, r.fatal, want, tc.wantFatal, r.errs)
			}
		})
	}
}
