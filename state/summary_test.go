package state

import "testing"

func TestSummary(t *testing.T) {
	entry := func(st ContainerStatus, p Progress) *Container {
		return &Container{Status: st, StoryProgress: p}
	}
	cases := []struct {
		name       string
		containers []*Container
		want       string
		unsuccess  int
	}{
		{"no containers", nil, "no containers (0 total)", 0},
		{"completed with every story done is completed",
			[]*Container{entry(StatusCompleted, Progress{Total: 3, Completed: 3})}, "1 completed (1 total)", 0},
		{"completed with a story failed says so",
			[]*Container{entry(StatusCompleted, Progress{Total: 4, Completed: 2, Failed: 1})}, "1 completed with failures (1 total)", 1},
		{"completed with stories skipped by hand is completed",
			[]*Container{entry(StatusCompleted, Progress{Total: 3, Completed: 1})}, "1 completed (1 total)", 0},
		{"a failed story of a running container is not yet an outcome",
			[]*Container{entry(StatusRunning, Progress{Total: 3, Failed: 1, InProgress: 1})}, "1 running (1 total)", 0},
		{"every status in a fixed order, unknown ones last",
			[]*Container{entry(StatusStopped, Progress{}), entry(StatusFailed, Progress{}), entry("paused", Progress{}),
				entry(StatusPending, Progress{}), entry(StatusRunning, Progress{}),
				entry(StatusCompleted, Progress{Total: 1, Failed: 1}), entry(StatusCompleted, Progress{Total: 1, Completed: 1})},
			"1 completed, 1 completed with failures, 1 running, 1 pending, 1 failed, 1 stopped, 1 paused (7 total)", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(&Swarm{Containers: tc.containers})
			if s.String() != tc.want || s.Unsuccessful() != tc.unsuccess {
				t.Fatalf("summary %q, %d unsuccessful; want %q, %d", s.String(), s.Unsuccessful(), tc.want, tc.unsuccess)
			}
		})
	}
	if s := Summarize(nil); s.Total != 0 || s.String() != "no containers (0 total)" {
		t.Fatalf("Summarize(nil) = %+v", s)
	}
}
