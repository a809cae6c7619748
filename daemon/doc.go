// Package daemon serves aimid's API (its types are package api): JSON over
// HTTP on a unix socket with NDJSON streams. It holds the Server that
// serves it in front of a Swarms implementation (the orchestrator's Manager),
// the socket's life cycle (0700 directory, 0600 socket, stale socket
// detection, one daemon per socket), and the typed Client the `aimi` CLI uses.
//
// It does not run swarms or read config: the orchestrator does the work and
// package aimid wires config, engine and git service together.
//
// # Protocol
//
//	GET  /v1/health                                -> api.Health
//	POST /v1/swarms/start    api.StartRequest      -> api.SwarmView
//	GET  /v1/swarms                                -> api.SwarmList
//	GET  /v1/swarms/status?repo=DIR                -> api.SwarmView
//	POST /v1/swarms/stop     api.StopRequest       -> api.SwarmView
//	POST /v1/swarms/resume   api.ResumeRequest     -> api.SwarmView
//	POST /v1/swarms/cleanup  api.CleanupRequest    -> api.CleanupReport
//	GET  /v1/swarms/logs?repo=DIR&name=N&follow=1  -> NDJSON of state.Record
//	GET  /v1/events[?repo=DIR]                     -> NDJSON of api.Event
//
// logs also takes tail=N (the last N records), since=RFC3339 (records from
// that time) and after=SEQ (records after that seq): the journal is read
// from its end as far as they reach, and streamed as the client reads.
//
// Errors are {"error":"...","code":"..."} (plus "field" naming the bad
// request field and "problems" listing invalid task files) with 400 for
// invalid input, 404 for an unknown swarm or container, 409 for an active
// swarm, 503 while shutting down and 500 otherwise. The API is only as
// private as the socket: anyone who can open it can run containers, so it is
// created 0600 in a 0700 directory owned by the daemon's user.
package daemon
