// Package sandboxnet is the sealed sandboxes' network, the orchestrator's
// SandboxNet: which of the daemon's services each sandbox reaches (the
// egress proxy, the git service, the model gateway, its budget and ask
// endpoints), the egress rules of each container (egress.allow, its
// repository's .aimi/config.yaml, a remote-mode origin) and the proxy
// variables it runs with. On one engine the services are unix sockets of
// the sandbox's own (egress.Sockets); on a Docker Swarm mode cluster they
// sit behind the daemon's door on git.address, reached by each sandbox's
// relay (egress.Door).
//
// It decides what a sandbox is served, not how: the sockets, the door and
// the proxy are package egress's, the services' answers are their own
// packages' (gitserve, gateway, budget, inbox).
package sandboxnet
