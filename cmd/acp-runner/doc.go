// Command acp-runner is the main process of every sandbox container. It reads
// one task-request line on stdin, clones the repository, runs the task file's
// stories through a coding agent, and reports progress-update, completion and
// error lines on stdout (protocol only; logs go to stderr). Build it static:
// CGO_ENABLED=0 go build ./cmd/acp-runner. The image needs git and /bin/sh.
//
// Usage:
//
//	acp-runner               run the task-request read from stdin
//	acp-runner demo-agent    serve the built-in deterministic ACP agent on stdio
//	acp-runner net-relay     a Swarm mode sandbox's relay to the daemon's door
//	acp-runner score         a scoring sandbox: runs $AIMI_SCORE_COMMAND in the workspace
//	                         (AIMI_NET_FORWARD, AIMI_NET_DOOR, AIMI_NET_SUBNET)
//
// Exit status: 0 after completion "completed" or "stopped", 1 after an error
// message or completion "failed", 2 for a configuration error (reported as an
// error message too).
//
// Signals: SIGTERM or SIGINT stop the run: the agent's turn is cancelled with
// session/cancel, open permission requests are answered cancelled, the agent
// gets AIMI_STOP_GRACE to end its turn, then its process group is killed, and
// the runner emits completion "stopped". Give the container a stop timeout
// longer than AIMI_STOP_GRACE plus a few seconds.
//
// Environment (set by the daemon):
//
//	AIMI_AGENT              acp | exec | demo. Default: acp when AIMI_AGENT_COMMAND is
//	                        set, else demo.
//	AIMI_AGENT_COMMAND      acp: the ACP agent's command line, run as `sh -c "exec ..."`
//	                        in the workspace (e.g. "claude-agent-acp", "gemini
//	                        --acp", "codex-acp", "opencode acp", "goose acp");
//	                        one fresh agent process per story.
//	                        exec: a shell command run per story with the prompt on stdin
//	                        and AIMI_STORY_ID set; exit status 0 means the turn ended well.
//	AIMI_AGENT_AUTH_METHOD  optional ACP auth method id (from the agent's initialize answer)
//	                        to call authenticate with before session/new; an agent that
//	                        answers session/new with auth_required fails the story with
//	                        the method ids it offers.
//	AIMI_VERIFY_COMMAND     optional shell command run in the workspace after each story
//	                        the agent finished (stop reason end_turn); non-zero exit fails
//	                        the story with the tail of its output.
//	AIMI_PERMISSION_POLICY  allow (default) | reject | allow-kinds:read,edit,execute,...
//	                        answers session/request_permission; kinds are ACP tool kinds
//	                        (read, edit, delete, move, search, execute, think, fetch,
//	                        switch_mode, other).
//	AIMI_WORKSPACE          directory to clone into, empty or missing; default /workspace.
//	                        fs/* and terminal/* of the agent are confined to it.
//	AIMI_STOP_GRACE         Go duration an agent gets to end a cancelled turn; default 5s.
//	AIMI_AGENT_HANDSHAKE_TIMEOUT
//	                        Go duration an ACP agent gets to answer each of initialize,
//	                        authenticate and session/new; default 2m (the daemon sets it
//	                        from agent.handshake_timeout). A silent agent fails its story
//	                        with an error naming the step.
//	AIMI_AGENT_STALL_TIMEOUT
//	                        Go duration an ACP agent's turn may go with no ACP traffic,
//	                        no tool call reported running and no terminal running; then
//	                        the turn is cancelled and the story retried once, and a
//	                        second stall fails it with AGENT_STALLED. Default 15m
//	                        (agent.stall_timeout).
//	AIMI_AGENT_LOOP_LIMIT   the same tool call (title, kind, input) this many times in a
//	                        row is handled like a stall; 0 turns the check off. Default 8
//	                        (agent.loop_limit).
//	AIMI_AGENT_LIMIT_RETRIES
//	                        times a story whose agent ended its turn in error while the
//	                        container's model calls were limited is run again after the
//	                        limit's reset (asked of the model gateway at AIMI_GATEWAY_URL
//	                        with one of the container's placeholders); 0 fails it.
//	                        Default 5 (agent.limit_retries).
//	AIMI_GIT_AUTHOR_NAME    author and committer of the story commits; default "aimi swarm".
//	AIMI_GIT_AUTHOR_EMAIL   default "swarm@aimi.invalid".
//	AIMI_GIT_TOKEN          optional token for https clone and push, sent as HTTP Basic
//	                        auth (AIMI_GIT_USERNAME:token) by a relay inside the runner:
//	                        git talks plain http to it on the loopback and never holds
//	                        the token (not in its environment, command line or config),
//	                        so nothing the agent plants in git's configuration or
//	                        attributes can read it or send it elsewhere. Never in logs or
//	                        messages, and removed from the environment of agents, verify
//	                        commands and terminals.
//	AIMI_GIT_USERNAME       user name for the token; default x-access-token.
//	GIT_SSL_CAINFO          CA bundle the repository's certificate must chain to (the
//	                        daemon's git service); read by the runner's relay.
//	AIMI_PUSH_RETRY         Go duration the run's last push retries while the repository
//	                        is unreachable (a daemon restart); default 10m. Pushes after
//	                        each story retry for at most 15s (the next push carries
//	                        their commits). A run whose last push fails ends "failed"
//	                        with GIT_PUSH_FAILED naming the commits not received.
//	AIMI_WARM               "1": a warm-pool sandbox. Before anything else the runner reads
//	                        one claim line from stdin (contract.WarmClaim): the
//	                        environment above, as the daemon would have set it on a
//	                        created container, and the git service's CA, written to a
//	                        file in the temporary directory. The task-request follows.
//	AIMI_SWARM_ID           envelope ids for the error message when the task-request
//	AIMI_CONTAINER_ID       itself is unreadable (default: a fresh id and the hostname).
//	AIMI_LOG_LEVEL          debug | info (default) | warn | error.
//	AIMI_TASK_REQUEST_FILE  read the task-request from this file instead of stdin.
//	AIMI_SECRET_ENV         comma-separated names whose values are the files of those
//	                        names in /run/secrets (Swarm mode secrets), read first.
//	AIMI_RUN_AS             a user (name or uid[:gid]) the runner becomes right after
//	                        reading /run/secrets when started as root: the secret files
//	                        are root's, mode 0400, so the agent (that user) cannot read
//	                        them; it also sets no_new_privs and HOME.
//
// The task-request's envVars are added to the environment of the agent, the
// verify command and terminals (not of the runner itself).
//
// The demo agent and its test markers ([demo:fail], [demo:slow],
// [demo:ignore-cancel]) are described in package demoagent.
package main
