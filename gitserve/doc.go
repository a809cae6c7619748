// Package gitserve is the daemon's git service for local mode: it serves a
// bare mirror of the user's checkout per swarm over smart HTTP (git
// http-backend behind net/http/cgi) on TLS, to the swarm's containers only,
// with one random token per container. A token may clone and fetch its
// swarm's repository and push exactly refs/heads/<its branch>: the ref
// updates of every push are parsed from the request's pkt-lines before git
// sees the request, and a pre-receive hook in the mirror checks them again.
//
// It owns the service's CA (created once in its data directory), the
// mirrors, the grants (persisted as token hashes, never the tokens) and the
// record of what each container pushed, which is what Unreceived answers
// from. Publishing the received branch to the user's checkout and a hosted
// remote is package publish; which containers to start, keep or remove is
// the orchestrator's.
package gitserve
