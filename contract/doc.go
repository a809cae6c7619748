// Package contract names what aimid, the sandbox containers and acp-runner
// agree on outside the swarm messages: the org.aimi.* labels that index
// containers and networks on the engine (the recovery index: with the state
// file gone, the daemon finds its containers by them), and the environment
// variables the daemon sets on a container for acp-runner to read. It holds
// names only, so the runner and the CLI import it without the Docker client.
package contract
