// Package engine is what the orchestrator needs from a container engine,
// written once and owned by no engine: the Engine interface, the sandbox
// Spec it creates from, the results it reports (Info, Exit, Line, Event,
// NetworkInfo), the errors callers match with errors.Is, the failure codes
// an engine reports for a sandbox it ended, and the optional capabilities
// (optional.go) an engine may add, each a small interface named there.
//
// Backends live beside it and import it, never each other: package
// container is the single Docker engine, package swarmmode a Docker Swarm
// mode cluster (docs/kubernetes.md maps the interface onto Kubernetes). The
// orchestrator imports only this package and never learns which backend
// it talks to.
//
// Fields of Spec and Info that not every backend honours or fills say so
// in their comments; a backend that cannot honour a field the caller
// requires (RequireRuntime) refuses the create rather than ignore it.
package engine
