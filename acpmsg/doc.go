// Package acpmsg owns the swarm message contract: the envelope and its four
// payloads (task-request, progress-update, completion, error), their
// validation against the spec's regexes and size limits, and the NDJSON
// reader and writer that carry them over a container's stdin and stdout.
// It knows nothing about Docker, state or agents.
package acpmsg
