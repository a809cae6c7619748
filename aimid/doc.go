// Package aimid assembles the aimi swarm daemon: Serve loads the
// configuration, takes the socket and the instance (before any container
// is touched), opens the engine backend and the warm pool, starts the
// services the sandboxes reach (the local-mode git service, the model
// gateway and its ledger, the budgets, the sealed sandbox network, the
// inbox, the notifier, the metrics), makes the orchestrator's Manager,
// adopts the swarms the engine holds, and answers the API on the socket
// until its context ends; then it lets go of the containers (they keep
// running) and flushes.
//
// The decisions are the packages': configs (the layers, what a
// repository's file changes for one start), budget, sandboxnet, gitserve,
// gateway, orchestrator. What is decided here is how they meet: the order
// things start and stop in, the mapping of the configuration onto each
// part's options, and the share of the open files limit the git service
// may hold. Options are what cmd/aimid's flags say, so a test can run a
// daemon in its own process with them.
package aimid
