// Package state keeps a swarm's aggregate state: the fold of container
// messages into .aimi/swarm-state.json, the atomic, locked store of that
// file, and the per-container journal that makes every line read durable
// before the state it changes is written. It knows nothing about Docker; the
// orchestrator feeds it lines and messages.
//
// # Model
//
// Swarm, Container and Progress marshal to exactly the shape of
// spec/swarm-state.schema.json (no extra fields but its two optional
// sections, attempts and land, which the shell tools ignore and the
// Recorder's saves keep as the file has them). Timestamps are written as
// RFC 3339 in UTC (nanosecond precision when the time has it). The two
// optional-but-nullable fields, prUrl and acpPid, are always written, as null
// when unset: readers (jq in the shell tools) see the same key either way,
// and a file written by another tool without them loads as nil. Containers
// keep insertion order. Save refuses a swarm that would not validate against
// the schema (Swarm.Validate), so a pending container needs its engine ID
// (create it, start it later) before it is saved.
//
// A completed container with failed stories keeps the spec's completed
// (every story finished); Container.CompletedWithFailures and Summarize
// tell it apart from storyProgress.failed, for the status summary, the
// daemon's view and `start --follow`'s exit code. A new run reopens the
// stories skipped behind a failed one (tasks.File.SkippedBehindFailure),
// and NewTracker starts them pending.
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
// message), or is a completion completed while a story is still pending or
// in progress, is rejected with a *RejectedError and leaves the state
// unchanged; the last carries Code CodeCompletionContradicts, for the daemon
// to fail the container with.
//
// # Store
//
// Store is <repo>/.aimi/swarm-state.json. Saves write a temp file in the same
// directory, fsync it, rename it over the file and fsync the directory, all
// under flock(LOCK_EX) on .aimi/swarm-state.json.lock, the lock the aimi
// shell tools take (waiting for it honours ctx). Readers need no lock:
// rename is atomic, so they see the old or the new file, never a mix. A
// missing file is ErrNoState; one that cannot be read is a *CorruptError,
// and Load leaves it exactly as it is: reading never moves, renames or
// rewrites the file. Reading is lenient where the shell tools are loose (an
// integer written as a string, an unset prUrl or acpPid written as ""); a
// value it cannot accept is named by its field (containers[0].acpPid). Only
// the Recorder's save, about to replace a file that holds no JSON object at
// all, renames it aside first to swarm-state.json.corrupt-<UTC time>. Update is load, mutate,
// save under one lock hold, so other tools' edits in between are kept; what
// the mutation adds or changes must validate, while entries it leaves as
// another tool wrote them are written back untouched. CheckFile checks raw
// bytes for exactly the schema's shape (keys, nulls, types, patterns)
// without a JSON Schema engine; `aimi swarm status --json` uses it, and a
// test holds it to the schema itself.
//
// # Journal
//
// Every line read from a container, and every decision the daemon makes about
// it (OOM, crash, timeout, the task-request it sent: stream "daemon"), is one
// NDJSON Record appended to .aimi/swarm/<swarmId>/<containerName>.ndjson:
//
//	{"seq":1,"cursor":"2026-11-22T10:31:00.123456789Z#0","time":"...","stream":"stdout",
//	 "valid":true,"type":"progress-update","message":{...}}
//	{"seq":2,"cursor":"...","time":"...","stream":"stdout",
//	 "reason":"line is not JSON","raw":"npm WARN ..."}
//	{"seq":3,"cursor":"...","time":"...","stream":"stderr","raw":"fetching ..."}
//
// seq counts from 1 per container and continues across restarts; cursor is
// the line's position in its stream (internal/logcursor: the engine's log
// timestamp and the index among the stream's lines sharing it; empty for
// daemon records); the last cursor of each stream is where a reader
// resumes (LastPosition, Recorder.Position);
// time is when the record was made; valid (left out when false) and reason
// are the message validator's verdict (a stderr line is never a message and
// has neither); message is the parsed message of a valid line, raw the line
// otherwise (rawBase64 instead when the line is not UTF-8, so nothing is
// lost); rejected is the fold's reason when a valid message was not applied.
//
// A journal has a cap (RecorderOptions.JournalCap, DefaultJournalCap 128
// MiB). Once it holds that much, the Recorder journals a daemon record
// saying so and from then on only daemon records and lines that change the
// state (so a replay still gives the same state); the other lines are
// counted in gap records: daemon records with "omitted":{"lines","bytes",
// "stdout","stderr"}, the last two the cursors of the last line left out on
// each stream, which the journal's position moves past. A gap record is
// written every MiB left out and when the container is untracked or the
// Recorder closes.
// A daemon record with "usage":{"provider","status","tokens","cost"} is the
// account of one model call the container made through the model gateway
// (package usage); like a gap record it is no message and is not folded.
// The envVars values of a task-request are replaced by "[redacted]" before
// journaling: they may hold secrets. A torn last line (crash mid-append) is
// ignored by readers and cut off before the next append; it was never
// acknowledged, because the state is only saved after the records it
// reflects are fsynced. Readers stream a journal, one record at a time
// (ScanJournal, from an offset JournalStart finds from the end for a tail, a
// time or a seq); ReadJournal, which holds it whole, is for tests. RestoreTracker
// rebuilds a container's fold from it after a restart (per-story status is
// not in the state file), skipping records that were rejected.
//
// # Recorder
//
// The Recorder is what the daemon calls per line. Track registers a
// container with its Tracker; Record appends the line's record to an
// in-memory journal buffer, folds its message and marks the state dirty. It
// journals every record it is given: dropping a line read twice is the
// output reader's rule alone (container.Lines). A background loop
// makes group commits: it takes every container's buffered records together
// with a snapshot of the swarm they produce (one critical section, so the
// snapshot reflects nothing outside the batch and earlier durable ones),
// writes and fsyncs the journals in parallel, and hands the snapshot to a
// saver goroutine, which writes it while the next batch commits (a
// pipeline; snapshots waiting behind a save coalesce into the newest). The
// save merges into the file under the lock: tracked containers' entries are
// appended or merged with the file's (an entry the Recorder did not change
// since its last write stays as the file has it; prUrl is written only when
// the Recorder has one; a stopped another tool wrote on a pending or running
// container stays: see merge.go), entries the Recorder does not track are
// kept. When
// 8 MiB of journal is waiting, Record blocks (backpressure). Flush forces a
// batch and waits until everything recorded before it is durable and saved
// (call it when a container exits, before removing it, and on shutdown);
// Close flushes and stops. Untrack stops following one container (its
// file entry stays; Track it again to follow a rerun). UpdateContainer changes a container's own fields
// (id, pid); status, prUrl and storyProgress come only from the fold.
// Its throughput and how far the state file trails the journal are measured
// by BenchmarkRecorder* (make bench); docs/benchmarks.md's table has the
// figures.
package state
