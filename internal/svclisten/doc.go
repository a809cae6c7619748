// Package svclisten is the serving shell of the daemon's sandbox-facing
// services (the git service and the model gateway). Its Shell serves one
// TLS listener per network gateway address, each accepting connections
// from that address's own subnet only (a sandbox of another network
// reaches every address of the host and must be refused on all but its
// own), with a certificate for the address, a preferred port and the
// addresses kept across restarts (Addresses, persisted by the owner with
// its own state), a sweep that stops serving addresses the host no longer
// has, and a server on each sandbox's own socket, which says who asks
// (SandboxOf). Connections are bounded per source address, per sandbox
// (contract.ChannelConns) and in total.
//
// Its Bounded listener is the daemon's one connection limiter for a
// socket of one sandbox's own (git, gateway, egress proxy, asks, budgets):
// past its bound it refuses a connection as it comes, or waits for a
// place.
//
// A Shell is guarded by its owner's mutex: the owner persists the port and
// addresses with its own state, under that same lock. What the services
// answer (tokens, placeholders, git, models) is theirs.
package svclisten
