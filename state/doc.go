// Package state keeps a swarm's aggregate state: the fold of container
// messages into .aimi/swarm-state.json, the atomic, locked store of that
// file, and the per-container journal that makes every line read durable
// before the state it changes is written. It knows nothing about Docker; the
// orchestrator feeds it lines and messages.
//
// # Model
//
// Swarm, Container and Progress marshal to exactly the shape of
// spec/swarm-state.schema.json (no extra fields). Timestamps are written as
// RFC 3339 in UTC (nanosecond precision when the time has it). The two
// optional-but-nullable fields, prUrl and acpPid, are always written, as null
// when unset: readers (jq in the shell tools) see the same key either way,
// and a file written by another tool without them loads as nil. Containers
// keep insertion order. Save refuses a swarm that would not validate against
// the schema (Swarm.Validate), so a pending container needs its engine ID
// (create it, start it later) before it is saved.
//
// # Fold
//
// A Tracker folds one container's messages (see Tracker.Apply). Story status
// is a map keyed by story id, so re-applying a message changes nothing.
// Stories start with the status their task file gives them; storyProgress
// counters are derived from the map: total is the story count, and skipped
// stories count in none of completed, failed, inProgress and pending (so the
// four may sum to less than total; `aimi swarm status` shows skipped
// separately). task-request and progress-update move a pending container to
// running; completion sets completed, failed or stopped and prUrl; error sets
// failed; nothing leaves a terminal status. A message that breaks the story
// transition table, names a story the task file does not have, or arrives
// after a terminal status (other than an exact duplicate of the final
// message) is rejected with a *RejectedError and leaves the state unchanged.
//
// # Store
//
// Store is <repo>/.aimi/swarm-state.json. Saves write a temp file in the same
// directory, fsync it, rename it over the file and fsync the directory, all
// under flock(LOCK_EX) on .aimi/swarm-state.json.lock, the lock the aimi
// shell tools take. Readers need no lock: rename is atomic, so they see the
// old or the new file, never a mix. A missing file is ErrNoState; an empty or
// unparsable one is renamed aside to swarm-state.json.corrupt-<UTC time> and
// reported as a *CorruptError naming both paths.
//
// # Journal
//
// Every line read from a container, and every decision the daemon makes about
// it (OOM, crash, timeout: stream "daemon"), is one NDJSON Record appended to
// .aimi/swarm/<swarmId>/<containerName>.ndjson:
//
//	{"seq":1,"cursor":"2026-11-22T10:31:00.123456789Z","time":"...","stream":"stdout",
//	 "valid":true,"type":"progress-update","message":{...}}
//	{"seq":2,"cursor":"...","time":"...","stream":"stdout","valid":false,
//	 "reason":"line is not JSON","raw":"npm WARN ..."}
//
// seq counts from 1 per container and continues across restarts; cursor is
// the engine's log timestamp of the line (empty for daemon records), the
// position to resume `logs --since` from (LastPosition); time is when the
// record was made; valid/reason is the message validator's verdict; message
// is the parsed message for a valid line, raw the line otherwise (rawBase64
// instead when the line is not UTF-8, so nothing is lost); rejected is the
// fold's reason when a valid message was not applied. The envVars values of a
// task-request are replaced by "[redacted]" before journaling: they may hold
// secrets. A torn last line (crash mid-append) is ignored by readers and cut
// off before the next append; it was never acknowledged, because the state
// is only saved after the records it reflects are fsynced.
//
// # Recorder
//
// The Recorder is what the daemon calls per line. Record appends to an
// in-memory journal buffer, folds the message and marks the state dirty; a
// background loop swaps the buffers out together with a snapshot of the
// swarm, writes and fsyncs the journals (group commit: one fsync per journal
// per batch), and only then saves the snapshot (coalesced: one write per
// batch), merging it into the file under the lock so entries of containers
// the Recorder does not track, written by other tools, are kept. Flush forces
// a batch and waits for it; Close flushes and stops the loop. RestoreTracker
// replays a journal after a restart, because per-story status is not in the
// state file.
package state
