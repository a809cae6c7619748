// Command aimi is the aimi swarm command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/mcpserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, mcpserver.NewCommand)
	stop()
	os.Exit(code)
}
