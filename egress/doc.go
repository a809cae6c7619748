// Package egress is the sandboxes' only way out of their network namespace.
//
// A sandbox container runs with no network at all (the engine's "none"
// mode: a loopback and nothing else), so it can open no connection to the
// host, the host's other addresses, link-local or metadata addresses,
// other networks or the internet, and sends no DNS or raw packet anywhere.
// The daemon's services reach it as unix sockets in a directory of its own,
// bind-mounted into the container (Sockets); the runner inside listens on
// loopback ports and forwards each connection to its socket, so programs in
// the sandbox use ordinary TCP URLs. Each socket belongs to one container:
// whatever arrives on it is that container's, with no address to spoof.
//
// One of the services is an HTTP(S) proxy (Proxy) that lets the sandbox
// reach the hosts an allowlist names (Rule, the egress.allow key): it
// matches the name the sandbox asked for (the CONNECT target or the
// request's host), resolves it itself, refuses names resolving to
// loopback, link-local, the host's own addresses or its engine's networks
// (and into private ranges unless the user named the host: Rule.Private),
// judging an IPv6 address by the IPv4 address it carries too (ranges, one
// definition), and dials exactly the address it checked, so a name cannot
// be rebound into the host between check and use. A rule naming an
// address allows that address. Every refusal is reported (Denial) for the
// container's journal, and logged with a bound per container. What a sandbox can make
// the proxy hold is bounded per container: connections, header sizes and
// idle time; a sandbox flooding it waits on its own socket only.
//
// With an Asker (egress.ask) a request no rule allows is held while a
// person is asked (Ask, Verdict), a bounded number per container; an
// allowing answer lets it through and the daemon keeps the grant for its
// scope (Grants: a story, a container, a swarm). Only a name is asked
// about, and only one that resolves outside this machine: the inward
// refusal holds whatever the answer, checked again at every connection.
package egress
