package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/aimi-tools/swarm/contract"
)

// score is `acp-runner score`: a scoring sandbox's process (best of N,
// docs/attempts.md). It runs the score command ($AIMI_SCORE_COMMAND) with
// sh -c in the workspace, which holds the attempt's tree, as the runner
// runs the verify command; the daemon reads the number from its output's
// last line. Its exit status is the command's.
func score(log *slog.Logger) int {
	command := os.Getenv(contract.EnvScoreCommand)
	if command == "" {
		fmt.Fprintln(os.Stderr, "acp-runner score: "+contract.EnvScoreCommand+" is empty; the daemon sets it from swarm.score_command")
		return 2
	}
	ws := os.Getenv(contract.EnvWorkspace)
	if ws == "" {
		ws = contract.DefaultWorkspace
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir, cmd.Stdout, cmd.Stderr = ws, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return ee.ExitCode()
	default:
		log.Error("score command", "err", err)
		return 1
	}
}
