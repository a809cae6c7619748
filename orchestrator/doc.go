// Package orchestrator runs swarms: one sandbox container per task file,
// started through a small Engine interface (satisfied by *container.Docker),
// at most MaxContainers at a time, each watched by one supervisor that writes
// the task-request to the container's stdin, feeds every output line to the
// state package's Recorder (journal first, then the fold into
// swarm-state.json) and decides the container's final status when it exits
// (messages first, then OOM, timeout, exit code).
//
// It also reconciles after a daemon restart (the table in DESIGN.md): the
// containers are found again by their org.aimi.* labels, running ones are
// re-attached and read on from the journal's last cursor, exits that happened
// while the daemon was down are taken, and missing containers become zombies.
//
// It owns no HTTP, no config loading and no Docker code: the daemon package
// serves the Manager over its socket, the configs package builds Config, the
// container package talks to the engine, and the state package owns the file
// formats. The git service for local mode is reached through GitService.
package orchestrator
