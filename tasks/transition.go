package tasks

// transitions is the story status table of spec/tasks-v3.md: completed is
// terminal, pending never jumps straight to completed or failed.
// in_progress -> pending puts back a story whose run stopped mid-story:
// nothing of it was committed, so it is as undone as before it started.
// skipped -> pending reopens, at the start of a new run, a story skipped
// because a dependency failed (SkippedBehindFailure): the run retries that
// dependency.
var transitions = map[Status][]Status{
	Pending:    {InProgress, Skipped},
	InProgress: {Completed, Failed, Pending},
	Failed:     {InProgress},
	Skipped:    {Pending},
}

// CanTransition reports whether a story may move from one status to another.
// Staying in the same status is allowed: re-applying a message changes nothing.
func CanTransition(from, to Status) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CanReport reports whether a container's progress-update may move a story
// from one status to another: the table without the moves back to pending,
// which only the runner's own task file makes (a run that stops mid-story
// reports nothing more for the story; a reopened skipped story starts the
// daemon's fold of the new run as pending, by the same rule).
func CanReport(from, to Status) bool {
	return CanTransition(from, to) && (to != Pending || from == Pending)
}

// Terminal reports whether a run leaves the status as it is: completed,
// and skipped (only the start of a new run reopens a skipped story).
func (s Status) Terminal() bool { return s == Completed || s == Skipped }
