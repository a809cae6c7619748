// Package forward is how a sandbox without a network reaches the daemon's
// services (git, the egress proxy, the model gateway): each loopback port
// AIMI_NET_FORWARD names is served by dialling a unix socket the daemon
// mounted into the container, or on a Docker Swarm mode cluster by
// dialling the sandbox's relay (AIMI_NET_RELAY) at the same port. The
// relay (Relay, acp-runner net-relay) is a service of its own beside the
// sandbox that sends each connection to the daemon's door over TLS with
// the sandbox's key. acp-runner starts the forwards, and so do the test
// stand-ins that take its place in a sandbox.
package forward
