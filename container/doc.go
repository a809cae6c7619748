// Package container is the Docker backend of package engine: it creates the
// sandbox containers (limits, dropped capabilities, no-new-privileges, an
// isolating network), starts and waits for them, writes the task-request to
// their stdin, reads their stdout/stderr back as timestamped lines from a
// resumable position (internal/logcursor, read by internal/enginelog), each
// line once, stops, inspects, lists and removes them by label, and reports
// the engine's die and oom events (engine.EventSource). It talks to the
// engine only through the Engine API client (never the docker CLI) and
// knows nothing about swarm messages, state files or journals: *Docker
// satisfies engine.Engine, the interface the orchestrator drives.
//
// Engine behaviour this package exists to absorb (measured on engine 20.10,
// API 1.41, json-file):
//
//   - Logs requested with Follow for a container that has not started yet end
//     at once with nothing: the engine only follows a running container's
//     logger. Lines therefore re-opens the stream (from its position, with
//     de-duplication) when the container starts, and reads one last time
//     after it exits, so a reader opened before Start misses nothing.
//   - The json-file driver splits a line longer than 16 KiB into partial
//     entries that all carry the first part's timestamp; the logs endpoint
//     returns each entry as its own multiplexed frame with its own timestamp
//     prefix, and only the last one ends in a newline. stdcopy.StdCopy would
//     glue those prefixes into the middle of the line, so internal/enginelog
//     reads the frames itself (same 8-byte header format) and reassembles lines.
//   - Since= is inclusive and has nanosecond resolution, so a cursor is the
//     engine's timestamp plus the index among the stream's lines sharing it.
//   - Following with Since, the engine was seen delivering every log entry
//     of a stream twice in a row; the frame splitter drops such echoes.
//   - ContainerAttach with Stdin must never CloseWrite: on a non-StdinOnce
//     attach that also closes the container's stdin read side. Closing the
//     whole hijacked connection does not.
//   - cgroups v1 sets State.OOMKilled; cgroups v2 does not always, so the
//     oom event is also reported by Events.
package container
