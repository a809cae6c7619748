// Package acpmsg owns the swarm message contract: the envelope and its four
// payloads (task-request, progress-update, completion, error), their
// validation against the spec's regexes and size limits, and the NDJSON
// reader and writer that carry them over a container's stdin and stdout.
// It knows nothing about Docker, state or agents.
//
// "ACP" in this package's name is the aimi tools' name for these swarm
// messages ("Agent Communication Protocol"), not the Agent Client Protocol
// that acp-runner speaks to the agent: that one is package acpclient.
package acpmsg
