// Command aimid is the aimi swarm daemon: it serves the JSON API of package
// daemon on a unix socket, runs swarms through the orchestrator against the
// Docker engine, and keeps them going across its own restarts (containers
// outlive it; Recover picks them up at start). Package aimid assembles it;
// this command parses the flags and runs it.
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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

var instanceRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, slog.SetDefault)
	stop()
	os.Exit(code)
}

// run is the daemon's life; it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer, setDefault func(*slog.Logger)) int {
	fs := pflag.NewFlagSet("aimid", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := aimid.Options{Flags: fs, Version: version}
	var logLevel string
	fs.StringVar(&o.Socket, "socket", "", "unix socket to serve on (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
	fs.StringVar(&o.DataDir, "data-dir", "", "the daemon's own files: git service CA and mirrors (default $XDG_STATE_HOME/aimi or ~/.local/state/aimi)")
	fs.StringVar(&o.UserConfig, "config", "", `user config file (default $XDG_CONFIG_HOME/aimi/config.yaml; "-" for none)`)
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.Instance, "instance", fmt.Sprintf("uid-%d", os.Getuid()), "this daemon's name on the engine (label "+contract.LabelDaemon+"): it adopts only containers carrying it")
	fs.BoolVar(&o.DrainPool, "drain-pool", false, "remove every sandbox waiting in the warm pool (sandbox.warm_pool), then exit; claimed ones belong to their swarms and stay")
	configs.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "aimid: %v (see aimid --help)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aimid: unexpected argument %q; aimid takes flags only\n", fs.Arg(0))
		return 2
	}
	if !instanceRE.MatchString(o.Instance) {
		fmt.Fprintf(stderr, "aimid: --instance %q: use letters, digits, '.', '_' and '-' (at most 63)\n", o.Instance)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "aimid: --log-level %q: use debug, info, warn or error\n", logLevel)
		return 2
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// Packages that log through slog.Default (or the log package) get the
	// same handler: one format, one level on stderr. The process's main
	// does it (slog.SetDefault); a test running a daemon in its process
	// does not: the default is every goroutine's.
	if setDefault != nil {
		setDefault(o.Logger)
	}
	if err := aimid.Serve(ctx, o); err != nil {
		// Plain text, not a log record: multi-line config problems must stay
		// readable.
		fmt.Fprintf(stderr, "aimid: %v\n", err)
		return 1
	}
	return 0
}
