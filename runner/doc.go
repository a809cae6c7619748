// Package runner is acp-runner's engine: it takes one task-request, prepares
// the repository (clone, branch), executes the task file's stories in
// dependency order through an agent backend (an ACP agent, a plain command, or
// the built-in demo agent), verifies, commits and pushes after every story,
// writes each story's status and notes back into the task file, and reports
// everything as swarm messages (progress-update, completion, error) through
// acpmsg.Writer. It leaves the message format to acpmsg, the task-file format
// to tasks and the ACP client methods to acpclient.
//
// Concurrency: stories that are ready together run at once up to the task
// file's maxConcurrency, in one shared working tree (one clone per container).
// Git steps (write task file, commit, push) are serialized; a commit takes the
// whole tree, so with maxConcurrency > 1 a commit may carry a concurrent
// story's in-flight edits. Per-story worktrees would separate them but need a
// merge step; the task files the planners write keep concurrent stories on
// separate files.
//
// Skips: a story whose dependency failed in this run is skipped, and so is,
// transitively, every story behind it (a skip caused by a failure does not
// satisfy dependents, unlike a skip decided before the run). Stories found
// failed or in_progress at the start (an earlier run) are retried once.
package runner
