package state

import (
	"fmt"
	"slices"
	"strings"
)

// CompletedWithFailures reports whether c is completed with stories that
// failed. The message spec's completed means every story finished, "some
// may have failed individually"; the state file keeps that status (other
// tools read it) and its storyProgress.failed tells the two apart. A story
// skipped because a dependency failed always comes with a failed one.
func (c *Container) CompletedWithFailures() bool {
	return c.Status == StatusCompleted && c.StoryProgress.Failed > 0
}

// Summary counts a swarm's containers by status, those completed with
// failed stories apart from the ones completed without: what the status
// summary line, `start --follow`'s exit code and the daemon's view say.
type Summary struct {
	Total int `json:"total"`
	// Completed counts the containers completed with no story failed.
	Completed             int `json:"completed"`
	CompletedWithFailures int `json:"completedWithFailures"`
	Running               int `json:"running"`
	Pending               int `json:"pending"`
	Failed                int `json:"failed"`
	Stopped               int `json:"stopped"`
	// Other counts statuses outside the schema's five, which another tool
	// may have written into the file.
	Other map[string]int `json:"other,omitempty"`
}

// Summarize counts s's containers.
func Summarize(s *Swarm) Summary {
	var sum Summary
	if s == nil {
		return sum
	}
	for _, c := range s.Containers {
		if c == nil {
			continue
		}
		sum.Total++
		switch c.Status {
		case StatusCompleted:
			if c.CompletedWithFailures() {
				sum.CompletedWithFailures++
			} else {
				sum.Completed++
			}
		case StatusRunning:
			sum.Running++
		case StatusPending:
			sum.Pending++
		case StatusFailed:
			sum.Failed++
		case StatusStopped:
			sum.Stopped++
		default:
			if sum.Other == nil {
				sum.Other = map[string]int{}
			}
			sum.Other[string(c.Status)]++
		}
	}
	return sum
}

// Unsuccessful is the number of containers that failed or completed with
// failed stories: each is worth a look and a `resume --retry-failed`.
func (s Summary) Unsuccessful() int { return s.Failed + s.CompletedWithFailures }

// String is the summary line's text, the non-zero counts in a fixed order:
// "1 completed, 1 completed with failures, 1 running (3 total)".
func (s Summary) String() string {
	var parts []string
	for _, kv := range []struct {
		n    int
		name string
	}{{s.Completed, "completed"}, {s.CompletedWithFailures, "completed with failures"}, {s.Running, "running"},
		{s.Pending, "pending"}, {s.Failed, "failed"}, {s.Stopped, "stopped"}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kv.n, kv.name))
		}
	}
	other := make([]string, 0, len(s.Other))
	for st := range s.Other {
		other = append(other, st)
	}
	slices.Sort(other)
	for _, st := range other {
		parts = append(parts, fmt.Sprintf("%d %s", s.Other[st], st))
	}
	if len(parts) == 0 {
		parts = []string{"no containers"}
	}
	return fmt.Sprintf("%s (%d total)", strings.Join(parts, ", "), s.Total)
}
