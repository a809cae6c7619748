// Package warmpool keeps sandboxes of the configured image created and
// started before any task needs them, and hands them to starts (Claim): a
// start then waits for a rename and one stdin write instead of the
// engine's create and start. docs/warm-pool.md has the design.
//
// A pool sandbox is created on no network (a loopback only) with an empty
// socket directory of the pool's mounted at contract.NetDir (Options.
// SocketRoot; the daemon serves the container's sockets there once the
// claimed container is in its state file, SocketDir), with no name
// of a task, no token, no repository and no secret: its runner waits for a
// claim line (contract.WarmClaim) on stdin. Labels cannot change once a
// container exists, so the labels a created container would carry are
// kept in a claim record in the daemon's data directory, and Overlay, the
// engine the orchestrator uses, shows a claimed sandbox with them: the
// orchestrator, the state file, the journals and status cannot tell it
// from a created one, apart from contract.LabelWarm.
//
// Crash safety: a claim is recorded (phase claiming) before the sandbox is
// renamed, and confirmed once its swarm's state file holds it.
// Reconcile, at the daemon's start, completes a claim whose container is
// in its state file and puts any other claiming one back into the pool
// (nothing was sent to it: the claim line follows the state file's save).
package warmpool
