// Package tasks owns the task-file format (tasks.json, schema 3.0): parsing,
// validation with Error/Fix messages, the dependency graph, the ready set and
// the story status transition table. It never runs a story.
package tasks
