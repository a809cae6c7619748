// Package mcpserver is `aimi mcp`: a Model Context Protocol server on
// stdio, so that a coding agent (Claude Code, Codex, Gemini CLI, opencode)
// starts, watches, answers and lands swarms itself. It serves one
// repository, the one `aimi mcp` was started in (or --repo), and talks to
// aimid through its socket with the CLI's own functions (package cli):
// every check and refusal is the command line's, with the same message.
//
// Tools: swarm_start, swarm_status, swarm_logs, swarm_inbox, swarm_answer,
// swarm_stop, swarm_resume, swarm_usage and swarm_land. A refusal is a
// tool error (a result with isError), never a protocol error, so that the
// agent reads why and what to do.
//
// Resources: aimi://swarm/state (the state file, as `aimi swarm status
// --json` shows it) and aimi://swarm/journal/{name} (the last records of a
// container's journal; "land" is the land journal). A client that
// subscribes gets notifications/resources/updated when the swarm moves:
// the server follows the daemon's event stream (GET /v1/events) and
// reconnects when the daemon restarts.
//
// What it answers is untrusted text from containers, agents and task
// files: every answer passes the CLI's terminal-safety filter
// (internal/termsafe), has the secrets the user's config names, the
// publish token and the gateway's placeholder keys replaced by markers
// (configs.KnownSecrets), and is cut at maxOutput bytes; a journal is read
// at most maxTail records at a time.
package mcpserver
