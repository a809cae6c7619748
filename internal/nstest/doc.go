// Package nstest gives tests a host of their own on "the outside": a
// network namespace the test makes, joined to this machine by a veth pair,
// with a private address this machine routes to. It stands in for a public
// server, a company's server on its LAN or a resolver: an address a sandbox
// with any route out would reach, which no test needs to leave this
// machine for. Tests listen in it (Host.Listen, Host.ListenPacket) and
// count what arrives.
//
// Every namespace is named after the helper and the process that made it
// (NamePrefix), so parallel tests and packages never collide, and one left
// by a killed test process is removed by the next New (or by hand with
// `ip netns del`). It needs iproute2's ip and CAP_NET_ADMIN and
// CAP_SYS_ADMIN (root), as the project's test machines have.
package nstest
