package runner

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
)

// parseTaskFile decodes and checks a task file enough for the scheduler to be
// safe: schema version, at least one story, valid unique ids, known statuses,
// dependencies that exist. The full Error/Fix validation of spec/tasks-v3.md
// belongs to the tasks package; switch to tasks.Parse once it lands.
func parseTaskFile(data []byte) (*tasks.File, error) {
	var f tasks.File
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("Error: Invalid tasks.json - %v.\nFix: Make the task file one JSON object of schema 3.0", err)
	}
	if f.SchemaVersion != tasks.SchemaVersion {
		return nil, fmt.Errorf("Error: Invalid tasks.json - schemaVersion is %q.\nFix: Set schemaVersion to \"3.0\"", f.SchemaVersion)
	}
	if len(f.UserStories) == 0 {
		return nil, fmt.Errorf("Error: Invalid tasks.json - userStories is empty.\nFix: Add at least one story")
	}
	ids := map[string]bool{}
	for _, s := range f.UserStories {
		if !acpmsg.ValidStoryID(s.ID) {
			return nil, fmt.Errorf("Error: Invalid tasks.json - story id %q does not match US-\\d{3}.\nFix: Rename the story to US-001 style", s.ID)
		}
		if ids[s.ID] {
			return nil, fmt.Errorf("Error: Invalid tasks.json - two stories have id %q.\nFix: Give every story its own id", s.ID)
		}
		ids[s.ID] = true
		switch s.Status {
		case tasks.Pending, tasks.InProgress, tasks.Completed, tasks.Failed, tasks.Skipped:
		default:
			return nil, fmt.Errorf("Error: Invalid tasks.json - %s.status is %q.\nFix: Use pending, in_progress, completed, failed or skipped", s.ID, s.Status)
		}
	}
	for _, s := range f.UserStories {
		for _, d := range s.DependsOn {
			if !ids[d] || d == s.ID {
				return nil, fmt.Errorf("Error: Invalid tasks.json - %s.dependsOn references %q which does not exist.\nFix: Remove %q from %s.dependsOn or add a story with id %q", s.ID, d, d, s.ID, d)
			}
		}
	}
	return &f, nil
}

// marshalTaskFile writes the file back in the planners' layout (two-space
// indent, trailing newline).
func marshalTaskFile(f *tasks.File) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
