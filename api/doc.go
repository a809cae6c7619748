// Package api is aimid's wire protocol, shared by the daemon and the aimi
// CLI: the routes, the requests and answers (start request, swarm view,
// cleanup report, event), the error body with its codes and the errors
// they stand for. It holds types only, so the CLI links neither the
// orchestrator nor the Docker client; package daemon serves and reads it.
package api
