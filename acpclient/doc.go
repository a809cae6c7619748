// Package acpclient is the client side of the Agent Client Protocol for
// acp-runner: it implements every method of acp.Client for one agent
// connection. It answers permission requests by a Policy, serves
// fs/read_text_file and fs/write_text_file confined to the workspace (through
// os.Root, so ".." and symlinks that leave the workspace are refused), runs
// terminal/* commands in the workspace with bounded output, and folds the
// agent's session/update stream into a Transcript the runner turns into a
// story summary.
//
// Client.Connect puts a gate between the agent's stdout and the SDK: it
// applies session/update itself in stream order (the SDK's bounded
// notification queue would drop the connection on a burst), ignores and
// logs updates and notifications that belong to no session of ours, checks
// the answers to initialize, session/new and session/prompt for the fields
// the schema requires (and the protocol version), and ends the stream with
// ErrLineTooLong instead of a bare disconnect on an overlong line. Requests
// naming another session than the one session/new created are refused.
//
// It does not start agents or choose what to prompt; the runner does.
//
// The Agent Client Protocol is one of two "ACP"s here: package acpmsg's
// messages between aimid and acp-runner (the aimi tools' "Agent
// Communication Protocol") are the other, and never reach the agent.
//
// "ACP" here is the Agent Client Protocol (JSON-RPC between the runner and
// the agent), not the swarm's four message types between the runner and the
// daemon, which the aimi tools also call ACP: those are package acpmsg.
package acpclient
