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
// file's maxConcurrency, and never more than the run has stories to do. With
// a limit above one, each story works in its own
// git worktree (a detached checkout of the branch's HEAD under
// .git/aimi-worktrees/ in the workspace), and when it completes its changes are cherry-picked onto the
// branch: concurrent agents neither see nor commit each other's edits, a
// story whose edits conflict with one that finished first fails, and a failed
// story's changes stay off the branch. With a limit of one (a lone story
// too) the story works in
// the workspace itself and a failed story's changes are committed with its
// status, for inspection. Git steps (task file, commit, push) run on one
// goroutine.
//
// Git: the runner's git commands never hold the git token; clone and push
// go through an in-process relay that adds it (see relay). The clone holds
// only the branch's tip (or the default branch's, for a new branch), never
// the history behind it. The clone and the last push retry while the
// repository is unreachable (a daemon restarting), and a run is completed
// only once the repository holds its branch.
//
// Skips: a story whose dependency failed in this run is skipped, and so is,
// transitively, every story behind it (a skip caused by a failure does not
// satisfy dependents, unlike a skip decided before the run). Stories found
// failed or in_progress at the start (an earlier run) are retried once.
package runner
