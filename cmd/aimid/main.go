// Command aimid is the aimi swarm daemon: it serves the JSON API of package
// daemon on a unix socket, runs swarms through the orchestrator against the
// Docker engine, and keeps them going across its own restarts (containers
// outlive it; Recover picks them up at start).
//
// Usage:
//
//	aimid [--socket PATH] [--data-dir DIR] [--config FILE] [--log-level LEVEL] [--<config-key> VALUE ...]
//
// Config (precedence: flags > AIMI_* env > $XDG_CONFIG_HOME/aimi/config.yaml
// > <repo>/.aimi/config.yaml > the defaults in configs/aimi.yaml) is loaded
// once at start; each swarm start loads the repository's .aimi/config.yaml on
// top of the defaults (configs.PrepareStart says what applies per swarm).
// SIGTERM or SIGINT: stop accepting, let go of the containers (they keep
// running), flush state, remove the socket, exit 0.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, slog.SetDefault)
	stop()
	os.Exit(code)
}
