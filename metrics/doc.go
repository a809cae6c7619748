// Package metrics is what an operator's Prometheus scrapes from aimid, and
// the daemon's health check.
//
// Gauges that describe the swarms (containers and stories by status) are
// computed from the orchestrator's in-memory view at scrape time, so they
// can never drift from what `aimi swarm status` shows. Counters of things
// that happened (messages journaled and rejected, engine requests, state
// saves, journal bytes, git pushes) are incremented by hooks the daemon
// wires in: every hook only adds to a counter and returns, because it runs
// on the goroutine that did the work.
//
// /healthz answers 200 only when the daemon's loops answer too (the
// orchestrator's own health check, bounded by a deadline), not merely when
// the HTTP server is up.
//
// Labels are bounded: engine request kinds are normalised paths with ids
// replaced (at most maxKinds distinct, the rest "other"); rejection reasons
// are a class, not the free text the journal keeps.
package metrics
