// Package forward is how a sandbox without a network reaches the daemon's
// services (git, the egress proxy, the model gateway): each loopback port
// AIMI_NET_FORWARD names is served by dialling a unix socket the daemon
// mounted into the container. acp-runner starts them, and so do the test
// stand-ins that take its place in a sandbox.
package forward
