// Package acpclient is the client side of the Agent Client Protocol for
// acp-runner: it implements every method of acp.Client for one agent
// connection. It answers permission requests by a Policy, serves
// fs/read_text_file and fs/write_text_file confined to the workspace (through
// os.Root, so ".." and symlinks that leave the workspace are refused), runs
// terminal/* commands in the workspace with bounded output, and folds the
// agent's session/update stream into a Transcript the runner turns into a
// story summary. It does not start agents or choose what to prompt; the runner
// does.
package acpclient
