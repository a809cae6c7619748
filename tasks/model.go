package tasks

import "encoding/json"

// SchemaVersion is the only task-file schema this package reads.
const SchemaVersion = "3.0"

// DefaultMaxConcurrency applies when metadata.maxConcurrency is 0 or absent.
const DefaultMaxConcurrency = 4

// Status is a story's status; the five values are the spec's.
type Status string

const (
	Pending    Status = "pending"
	InProgress Status = "in_progress"
	Completed  Status = "completed"
	Failed     Status = "failed"
	Skipped    Status = "skipped"
)

// File is a parsed task file (schema 3.0).
type File struct {
	SchemaVersion string   `json:"schemaVersion"`
	Metadata      Metadata `json:"metadata"`
	UserStories   []Story  `json:"userStories"`

	extra map[string]json.RawMessage // unknown keys, written back as they were
}

// Metadata describes the feature the task file plans.
type Metadata struct {
	Title          string  `json:"title"`
	Type           string  `json:"type"`
	BranchName     string  `json:"branchName"`
	CreatedAt      string  `json:"createdAt"`
	PlanPath       *string `json:"planPath"`
	BrainstormPath string  `json:"brainstormPath,omitempty"`
	MaxConcurrency int     `json:"maxConcurrency,omitempty"`

	extra map[string]json.RawMessage // unknown keys, written back as they were
}

// Story is one user story.
type Story struct {
	ID                 string   `json:"id"`
	Title              string   `json:"title"`
	Description        string   `json:"description"`
	AcceptanceCriteria []string `json:"acceptanceCriteria"`
	Priority           int      `json:"priority"`
	Status             Status   `json:"status"`
	DependsOn          []string `json:"dependsOn"`
	Notes              string   `json:"notes"`

	extra map[string]json.RawMessage // unknown keys, written back as they were
}
