package runner

import (
	"github.com/aimi-tools/swarm/tasks"
)

// parseTaskFile validates a task file with the full rules of spec/tasks-v3.md;
// the error lists every problem in the Error/Fix form.
func parseTaskFile(data []byte) (*tasks.File, error) { return tasks.Parse(data) }

// marshalTaskFile writes the file back in the planners' layout, keeping
// fields this project does not know.
func marshalTaskFile(f *tasks.File) ([]byte, error) { return f.Marshal() }
