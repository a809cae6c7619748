// Package gitref owns the project's one rule for branch names: the name a
// task file's metadata.branchName, a task-request, the state file, the git
// service and publishing all accept. It is git's own ref-name rules
// (git-check-ref-format) for refs/heads/<name>, plus the swarm spec's
// narrower character set and a length a filesystem can store. It also
// knows the names git gives what it keeps: object ids, a split index's
// shared part. It never runs git.
package gitref
