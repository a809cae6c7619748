// Package spec carries the project's external contracts as files and makes
// the machine-readable one available to code: the swarm-state.json schema
// (swarm-state.schema.json, embedded), the task-file format (tasks-v3.md),
// the container message format (messages.md) and the fixtures every parser
// is tested against (fixtures/). The prose documents are the reference the
// validators in tasks, acpmsg and state implement; this package owns only
// the schema check.
package spec
