// Package notify tells people what happened without their watching: a
// permission request waits for a person, a container failed (with its
// error code), a container or a whole swarm finished, a model provider's
// limit makes containers wait. Each notice goes to
// every configured target: webhooks (a JSON POST whose "text" field makes
// it Slack-compatible; an "ntfy:" URL gets the text as a plain POST, as
// ntfy topics take it) and a local command (argv, never a shell, with the
// text as its last argument).
//
// Delivery never holds anything else up: each target has its own bounded
// queue and worker (a hanging URL delays only its own notices), every
// attempt has a time limit, redirects are refused, failures are retried
// with backoff a few times and then given up and journaled. A notice holds
// the repository, swarm, container, story, what happened and a link to the
// board when one is known; never a secret or token (known values are
// redacted as a notice is queued), and agent text only as a bounded line
// with control characters removed. Notices of waiting requests are bounded
// per container and per swarm in each window; the rest are told in one
// coalesced notice per swarm when the window ends. LimitNotices hears the
// model gateway's limited answers and limit waits and gathers those of one
// limit into one notice per swarm.
package notify
