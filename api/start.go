package api

import (
	"fmt"

	"github.com/aimi-tools/swarm/attempts"
)

// FieldError is an invalid request field: the daemon answers it with HTTP
// 400 and the field's name, and errors.Is(err, ErrInvalidRequest) holds.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidRequest) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidRequest }

// Check is the one rule for a start request's own fields, whatever the
// repository holds (its path has CheckRepoPath): the daemon applies it to
// what it receives and the orchestrator to what it is given, so a caller
// of either gets the same answer.
func (r StartRequest) Check() error {
	switch {
	case len(r.TaskFiles) == 0:
		return &FieldError{"taskFiles", "no task file given; name at least one .aimi/tasks/*-tasks.json"}
	case r.Max < 0:
		return &FieldError{"max", fmt.Sprintf("%d is negative; use a positive number of containers, or 0 for the configured default", r.Max)}
	case r.Append && r.Force:
		return &FieldError{"force", "append and force exclude each other; use one"}
	}
	if err := attempts.CheckCount(r.Attempts); err != nil {
		return &FieldError{"attempts", err.Error()}
	}
	if !attempts.ValidStop(r.AttemptsStop) {
		return &FieldError{"attemptsStop", fmt.Sprintf("%q is not a stop policy; use %s or %s", r.AttemptsStop, attempts.StopAll, attempts.StopFirstVerified)}
	}
	for i, f := range r.TaskFiles {
		if f == "" {
			return &FieldError{fmt.Sprintf("taskFiles[%d]", i), "empty path"}
		}
	}
	return nil
}
