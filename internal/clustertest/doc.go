// Package clustertest gives tests a real multi-node Docker Swarm mode
// cluster made of containers on the test machine's engine: one manager and
// workers, each a container running its own dockerd, joined into one swarm
// over a user-defined bridge network.
//
// The node image holds dockerd, containerd, runc and iptables from Debian's
// packages, built with package sandboximage's download-and-merge route and
// imported through the Engine API (no registry, no docker CLI), keyed by
// content so repeated runs reuse it. Nodes run without --privileged (which
// fails on the project's machines): SYS_ADMIN and NET_ADMIN, seccomp and
// AppArmor unconfined, the host's cgroup namespace with /sys/fs/cgroup bound
// read-write, and the storage driver dockerd picks on the node's volume
// (overlay2 where the kernel allows it). Each node's API is a unix socket
// in a host directory bound into the node, so tests reach it without
// exposing an unauthenticated TCP port. Images reach the nodes by ImageSave
// on the host engine and ImageLoad on each node.
//
// StartEngine starts a single such engine outside any swarm, with extra
// Debian packages, runtimes in its daemon.json, capabilities and host
// directories bound at the same path: an engine configuration (gVisor's
// runsc registered, say) a test needs without changing the host engine's.
//
// Everything it creates carries dockertest's run label and is removed by
// that label in Close. Starting a cluster takes tens of seconds, so a test
// package starts one in TestMain and shares it. It leaves what runs on the
// cluster to the tests.
package clustertest
