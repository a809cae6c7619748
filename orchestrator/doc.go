// Package orchestrator runs swarms: one sandbox container per task file,
// started through engine.Engine (the container and swarmmode backends),
// at most MaxContainers at a time, each watched by one supervisor that writes
// the task-request to the container's stdin, feeds every output line to the
// state package's Recorder (journal first, then the fold into
// swarm-state.json) and decides the container's final status when it exits.
//
// It also reconciles after a daemon restart (the table in docs/design.md): the
// containers are found again by their org.aimi.* labels, running ones are
// re-attached and read on from the journal's last position, exits that happened
// while the daemon was down are taken, and missing containers become zombies
// (CONTAINER_LOST). A lost state file is rebuilt from the labels and journals.
//
// It owns no HTTP, no config loading and no Docker code: the daemon package
// serves the Manager over its socket, the configs package builds Config, a
// backend of package engine talks to the engine, and the state package owns the file
// formats. The git service for local mode is reached through GitAccess, and
// a completed container's branch is published through Publisher.
//
// # Decisions
//
//   - Start validates every task file (path rules, then the copy the container
//     will read from git, see committed.go; one branch per file) before any
//     engine call, then creates the containers (in parallel, named in
//     task-file order) and starts each as soon as it exists and its pending
//     entry, with its engine id, is in the saved state file: a container
//     never runs without its entry, so a crash at any point leaves the
//     started ones recoverable, and the user does not wait for the last
//     create before the first start. A failed create ends the start: its
//     supervisors stop without deciding, and every container it made,
//     started or not, is removed with its state and journals. Names are aimi-<task file slug>, suffixed -2, -3... when a
//     container of that name belongs to another repository or still runs.
//   - Bounded fan-out uses a small FIFO limiter instead of
//     x/sync/semaphore: the semaphore is FIFO only in the order Acquire is
//     reached, which for one goroutine per container is the scheduler's
//     order; the limiter queues synchronously in launch, so containers start
//     in task-file order, and re-attached running containers take their slot
//     before any queued one starts. x/sync/errgroup bounds the parallel
//     creates.
//   - The final status: the container's own completion or error wins. Else,
//     in this order: stop requested -> completion stopped; past the timeout
//     (from the engine's start time, so it survives restarts) -> error
//     CONTAINER_TIMEOUT; OOM-killed -> CONTAINER_OOM; non-zero exit ->
//     AGENT_CRASH; exit 0 with stories unfinished -> AGENT_CRASH ("the
//     journal says otherwise" of DESIGN's table); exit 0 with every story
//     done -> completion completed. Each decision is journaled as a daemon
//     record (the message the daemon synthesised), so replaying a journal
//     gives the same state.
//   - A completion completed the story progress does not back (a story
//     still pending or in progress) is not believed: the fold rejects it
//     with COMPLETION_CONTRADICTS_PROGRESS and the daemon journals an error
//     of that code, so the container is failed (verdict.go). A rerun's fold
//     starts with the stories the previous run finished, which its runner
//     finds finished on the branch and never reports.
//   - Requests name a repository by any path; ResolveRepo (symlinks, then
//     the git top level) makes it one key, so two paths are one swarm.
//   - The state file is shared with the aimi shell tools (docs/state-file.md, "Sharing
//     swarm-state.json"): adoption leaves alone the entries it has neither a
//     container nor a journal of, and stopped written by another tool on a
//     pending or running container is a stop, seen at adoption and by a
//     watcher polling the file every second (foreign.go).
//   - The task-request is written to stdin first and journaled second: a
//     crash in between leaves it unjournaled and a re-attach sends it again
//     (the runner reads one line; a second copy is harmless), while the
//     opposite order could leave a runner waiting forever.
//   - Every line the reader delivers is journaled: container.Lines is the
//     one layer that drops a line read twice (a re-read, an engine echo),
//     given the journal's position on each stream (stdout and stderr are
//     ordered only approximately against each other, so each has its own
//     cursor).
//   - Crash safety comes from the journal: records are durable before the
//     state reflects them (state package), the supervisor reads the logs
//     after the journal's position, so a SIGKILL at any point neither loses
//     a line nor counts one twice.
//   - Events are published without blocking: a subscriber that falls 1024
//     events behind loses events, never stalls a swarm.
//   - Config.Labels marks everything a Manager creates and filters what
//     Recover adopts, so several daemons (or test runs) share one engine.
//   - A state file is a claim, not a warrant (identity.go): a swarm whose
//     containers (or the swarm the Manager holds) are labelled with another
//     repository path or directory (RepoID) is not adopted (a copy, a moved
//     repository: ErrNoSwarm saying whose it is); an entry whose id names a
//     container that is not the swarm's is left alone and reported; a
//     container is looked at again right before a stop or removal.
//   - Secrets: Config.RunnerEnv and the git token go into the container's
//     environment only; the task-request's envVars (Config.EnvVars) are
//     redacted in the journal by the state package; nothing else carries
//     them.
//   - Config.DiskBytes limits each container's writable layer; aimid
//     checks at start that the engine's storage driver can, and leaves it
//     0 (with a warning) when it cannot.
package orchestrator
