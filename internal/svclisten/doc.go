// Package svclisten is the listener set the daemon's sandbox-facing
// services (the git service and the model gateway) serve from: one TLS
// listener per network gateway address, each accepting connections from
// that address's own subnet only (a sandbox of another network reaches
// every address of the host and must be refused on all but its own), with
// a certificate for the address, a preferred port kept across restarts,
// a sweep that stops serving addresses the host no longer has, and a
// limit on the connections held per source address and in total. Its
// Bounded listener is the daemon's one connection limiter for a socket of
// one sandbox's own (git, gateway, egress proxy, asks, budgets): past its
// bound it refuses a connection as it comes, or waits for a place.
//
// A Set is guarded by its owner's mutex: the owner persists the port and
// addresses with its own state, under that same lock.
package svclisten
