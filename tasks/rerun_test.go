package tasks

import (
	"slices"
	"testing"
)

// rerunFile is US-001; US-002 after it; US-003 after US-002; US-004 after
// US-001; US-005 after nothing: a chain, a sibling and a root.
func rerunFile() *File {
	st := func(id string, deps ...string) Story {
		return Story{ID: id, Status: Pending, DependsOn: deps}
	}
	return &File{UserStories: []Story{st("US-001"), st("US-002", "US-001"), st("US-003", "US-002"), st("US-004", "US-001"), st("US-005")}}
}

func TestSkippedBehindFailure(t *testing.T) {
	cases := []struct {
		name   string
		status map[string]Status
		want   []string
	}{
		{"nothing failed: nothing to reopen", map[string]Status{"US-001": Completed, "US-002": Completed}, nil},
		{"the chain behind a failed story, transitively",
			map[string]Status{"US-001": Completed, "US-002": Failed, "US-003": Skipped, "US-004": Completed},
			[]string{"US-003"}},
		{"a root failed: every story behind it, direct or not",
			map[string]Status{"US-001": Failed, "US-002": Skipped, "US-003": Skipped, "US-004": Skipped, "US-005": Completed},
			[]string{"US-002", "US-003", "US-004"}},
		{"a story skipped by hand behind no failure stays skipped, and what follows it",
			map[string]Status{"US-001": Completed, "US-002": Skipped, "US-003": Skipped, "US-005": Skipped}, nil},
		{"a pending story behind a failure is not a skip",
			map[string]Status{"US-001": Completed, "US-002": Failed, "US-003": Pending}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rerunFile().SkippedBehindFailure(tc.status); !slices.Equal(got, tc.want) {
				t.Fatalf("SkippedBehindFailure = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("dependencies listed after their dependents", func(t *testing.T) {
		f := rerunFile()
		slices.Reverse(f.UserStories)
		got := f.SkippedBehindFailure(map[string]Status{"US-001": Failed, "US-002": Skipped, "US-003": Skipped})
		if !slices.Equal(got, []string{"US-003", "US-002"}) {
			t.Fatalf("SkippedBehindFailure = %v, want file order [US-003 US-002]", got)
		}
	})
	t.Run("the file's own statuses without a map", func(t *testing.T) {
		f := rerunFile()
		f.UserStories[0].Status, f.UserStories[3].Status = Failed, Skipped
		if got := f.SkippedBehindFailure(nil); !slices.Equal(got, []string{"US-004"}) {
			t.Fatalf("SkippedBehindFailure = %v", got)
		}
	})
}

func TestAReopenedStoryGoesBackToPendingButIsNeverReported(t *testing.T) {
	f := rerunFile()
	for _, to := range []Status{Skipped, Pending, InProgress, Completed} {
		if err := f.SetStatus("US-003", to, ""); err != nil {
			t.Fatal(err)
		}
	}
	if CanReport(Skipped, Pending) || CanReport(InProgress, Pending) || !CanReport(Pending, Pending) || !CanReport(Pending, Skipped) {
		t.Fatal("a container may report a move back to pending, or not a repeat of pending")
	}
	if err := f.SetStatus("US-003", Pending, ""); err == nil {
		t.Fatal("completed -> pending allowed")
	}
}
