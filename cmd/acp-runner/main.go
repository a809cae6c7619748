package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/runner"
	"github.com/aimi-tools/swarm/runner/forward"
	"github.com/google/uuid"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(os.Getenv(contract.EnvLogLevel))}))
	slog.SetDefault(log)

	if len(args) > 0 {
		switch args[0] {
		case "demo-agent":
			// Default signal handling: the runner ends the demo agent by
			// closing its stdin or signalling its process group.
			if err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, log.With("component", "demo-agent")); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("demo agent", "err", err)
				return 1
			}
			return 0
		case "net-relay":
			return netRelay(log)
		case "score":
			return score(log)
		case "-h", "--help", "help":
			fmt.Fprintln(os.Stderr, "usage: acp-runner [demo-agent|net-relay|score]  (see `go doc ./cmd/acp-runner` for the environment)")
			return 0
		default:
			fmt.Fprintf(os.Stderr, "acp-runner: unknown argument %q; usage: acp-runner [demo-agent|net-relay|score]\n", args[0])
			return 2
		}
	}

	stdin := bufio.NewReader(os.Stdin)
	if err := awaitClaim(stdin); err != nil {
		log.Error("configuration", "err", err)
		reportConfigError(runner.Config{}, err)
		return 2
	}
	// Secrets first: the configuration below reads the environment.
	if err := runner.LoadSecretEnv(os.Getenv, os.Setenv, contract.SecretDir); err != nil {
		log.Error("configuration", "err", err)
		reportConfigError(runner.Config{}, err)
		return 2
	}
	// Then no longer root (when started so to read them): the secret files
	// are root's only.
	if err := dropPrivileges(os.Getenv(contract.EnvRunAs)); err != nil {
		err = fmt.Errorf("%s: %w", contract.EnvRunAs, err)
		log.Error("configuration", "err", err)
		reportConfigError(runner.Config{}, err)
		return 2
	}
	if err := harden(); err != nil {
		log.Warn("cannot hide the runner's environment from same-user processes", "err", err)
	}
	cfg, err := runner.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Error("configuration", "err", err)
		reportConfigError(cfg, err)
		return 2
	}
	cfg.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A sandbox without a network reaches the daemon's services (git, the
	// egress proxy) through these loopback ports only; the runner's own
	// requests take their way past the agent's share of each.
	channels, err := forward.FromEnv(context.WithoutCancel(ctx), os.Getenv, log)
	if err != nil {
		log.Error("configuration", "err", err)
		reportConfigError(cfg, err)
		return 2
	}
	cfg.Dial = channels.DialContext
	in, err := runner.RequestInput(os.Getenv, runner.SkipClaims(stdin))
	if err != nil {
		log.Error("configuration", "err", err)
		reportConfigError(cfg, err)
		return 2
	}
	defer in.Close()
	return runner.Run(ctx, cfg, in, os.Stdout)
}

// awaitClaim is a warm-pool sandbox's wait for its claim, which brings the
// environment a created container has from the start; it prepares what
// the claim will need first while it waits. Nothing to do in a created
// container.
func awaitClaim(stdin *bufio.Reader) error {
	runner.WarmUp(os.Getenv, os.TempDir())
	return runner.ApplyWarmClaim(os.Getenv, os.Setenv, stdin, os.TempDir())
}

// reportConfigError emits the one error message a misconfigured runner owes
// the daemon, with the fallback ids (the request is not read).
func reportConfigError(cfg runner.Config, err error) {
	swarm, container := cfg.SwarmID, cfg.ContainerID
	if swarm == "" {
		swarm = uuid.NewString()
	}
	if container == "" {
		container, _ = os.Hostname()
	}
	m := acpmsg.NewMessage(acpmsg.TypeError, swarm, container, &acpmsg.ErrorPayload{Code: acpmsg.CodeInvalidInput, Message: acpmsg.TruncateOutput("acp-runner configuration: " + err.Error())})
	_ = acpmsg.NewWriter(os.Stdout).Write(m)
}

func logLevel(s string) slog.Level {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// netRelay is a Swarm mode sandbox's relay (forward.Relay), until
// SIGTERM.
func netRelay(log *slog.Logger) int {
	r, err := forward.RelayFromEnv(os.Getenv, contract.NetKeyFile, contract.NetCAFile)
	if err != nil {
		log.Error("relay configuration", "err", err)
		return 2
	}
	r.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := r.Run(ctx); err != nil {
		log.Error("relay", "err", err)
		return 1
	}
	return 0
}
