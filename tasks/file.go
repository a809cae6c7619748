package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Valid reports whether s is one of the five story statuses.
func (s Status) Valid() bool {
	switch s {
	case Pending, InProgress, Completed, Failed, Skipped:
		return true
	}
	return false
}

// MaxConcurrencyOrDefault is metadata.maxConcurrency, or
// DefaultMaxConcurrency when it is 0 or absent.
func (f *File) MaxConcurrencyOrDefault() int {
	if f.Metadata.MaxConcurrency > 0 {
		return f.Metadata.MaxConcurrency
	}
	return DefaultMaxConcurrency
}

// Story returns the story with the given id.
func (f *File) Story(id string) (Story, bool) {
	for _, s := range f.UserStories {
		if s.ID == id {
			return s, true
		}
	}
	return Story{}, false
}

// effective is a story's current status: the caller's view when it has
// one, else the file's.
func effective(s Story, status map[string]Status) Status {
	if st, ok := status[s.ID]; ok {
		return st
	}
	return s.Status
}

// Ready returns the stories that may start now, lowest priority first: their
// status is pending and every dependency is completed or skipped. status
// holds the current statuses (overriding those in the file; nil means the
// file's own). At most MaxConcurrencyOrDefault minus the number of stories
// in progress are returned. The returned stories carry their current status.
func (f *File) Ready(status map[string]Status) []Story {
	byID := make(map[string]Story, len(f.UserStories))
	running := 0
	for _, s := range f.UserStories {
		byID[s.ID] = s
		if effective(s, status) == InProgress {
			running++
		}
	}
	slots := f.MaxConcurrencyOrDefault() - running
	if slots <= 0 {
		return nil
	}
	var ready []Story
	for _, s := range f.UserStories {
		if effective(s, status) != Pending {
			continue
		}
		ok := true
		for _, dep := range s.DependsOn {
			d, known := byID[dep]
			if st := effective(d, status); !known || (st != Completed && st != Skipped) {
				ok = false
				break
			}
		}
		if ok {
			s.Status = Pending
			ready = append(ready, s)
		}
	}
	sort.SliceStable(ready, func(i, j int) bool { return ready[i].Priority < ready[j].Priority })
	if len(ready) > slots {
		ready = ready[:slots]
	}
	return ready
}

// Blocked is a pending story that can never become ready because a story it
// depends on failed; the executor marks it skipped, naming the dependency.
type Blocked struct {
	StoryID    string
	FailedDeps []string
}

// Blocked lists the pending stories with a failed dependency, in file order,
// given the current statuses (as for Ready).
func (f *File) Blocked(status map[string]Status) []Blocked {
	byID := make(map[string]Story, len(f.UserStories))
	for _, s := range f.UserStories {
		byID[s.ID] = s
	}
	var out []Blocked
	for _, s := range f.UserStories {
		if effective(s, status) != Pending {
			continue
		}
		var failed []string
		for _, dep := range s.DependsOn {
			if d, ok := byID[dep]; ok && effective(d, status) == Failed {
				failed = append(failed, dep)
			}
		}
		if len(failed) > 0 {
			out = append(out, Blocked{StoryID: s.ID, FailedDeps: failed})
		}
	}
	return out
}

// SetStatus moves a story to a new status following the transition table
// and, when notes is not empty, replaces its notes. It refuses an unknown
// story or a transition the table does not allow.
func (f *File) SetStatus(id string, to Status, notes string) error {
	for i := range f.UserStories {
		s := &f.UserStories[i]
		if s.ID != id {
			continue
		}
		if !CanTransition(s.Status, to) {
			return fmt.Errorf("set %s status: %s -> %s is not an allowed transition (see spec/tasks-v3.md)", id, s.Status, to)
		}
		s.Status = to
		if notes != "" {
			s.Notes = notes
		}
		return nil
	}
	return fmt.Errorf("set %s status: no such story in the task file", id)
}

// Marshal encodes the file as the planners write it: 2-space indent, stories
// in file order, fields unknown to this package kept, trailing newline.
func (f *File) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode task file: %w", err)
	}
	return buf.Bytes(), nil
}

// Unknown fields are kept so that writing a status back does not drop what
// newer planners (or humans) put in the file. Known keys come first in the
// model's order, unknown ones after them, sorted.

var (
	fileKeys     = []string{"schemaVersion", "metadata", "userStories"}
	metadataKeys = []string{"title", "type", "branchName", "createdAt", "planPath", "brainstormPath", "maxConcurrency"}
	storyKeys    = []string{"id", "title", "description", "acceptanceCriteria", "priority", "status", "dependsOn", "notes"}
)

func (f *File) UnmarshalJSON(data []byte) error {
	type plain File
	extra, err := decodeKeeping(data, (*plain)(f), fileKeys)
	f.extra = extra
	return err
}

func (f File) MarshalJSON() ([]byte, error) {
	type plain File
	return encodeKeeping(plain(f), f.extra)
}

func (m *Metadata) UnmarshalJSON(data []byte) error {
	type plain Metadata
	extra, err := decodeKeeping(data, (*plain)(m), metadataKeys)
	m.extra = extra
	return err
}

func (m Metadata) MarshalJSON() ([]byte, error) {
	type plain Metadata
	return encodeKeeping(plain(m), m.extra)
}

func (s *Story) UnmarshalJSON(data []byte) error {
	type plain Story
	extra, err := decodeKeeping(data, (*plain)(s), storyKeys)
	s.extra = extra
	return err
}

func (s Story) MarshalJSON() ([]byte, error) {
	type plain Story
	return encodeKeeping(plain(s), s.extra)
}

func decodeKeeping(data []byte, v any, known []string) (map[string]json.RawMessage, error) {
	if err := json.Unmarshal(data, v); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for _, k := range known {
		delete(all, k)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

func encodeKeeping(v any, extra map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(extra) == 0 {
		return out, nil
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out = out[:len(out)-1] // drop the closing brace
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, kb...)
		out = append(out, ':')
		out = append(out, extra[k]...)
	}
	return append(out, '}'), nil
}
