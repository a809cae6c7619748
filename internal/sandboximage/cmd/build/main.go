// Command build builds the aimi sandbox image (see package sandboximage):
// `go run ./internal/sandboximage/cmd/build [-tag aimi-sandbox:latest]`,
// which is what `make sandbox-image` runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aimi-tools/swarm/internal/sandboximage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var opts sandboximage.Options
	fs.StringVar(&opts.Tag, "tag", sandboximage.DefaultTag, "tag of the image to build")
	fs.StringVar(&opts.CacheDir, "cache-dir", "", "rootfs cache dir (default $XDG_CACHE_HOME/aimi/sandbox)")
	fs.StringVar(&opts.RunnerBinary, "runner", "", "prebuilt static acp-runner to use instead of building ./cmd/acp-runner")
	fs.StringVar(&opts.RunnerPackage, "runner-pkg", "./cmd/acp-runner", "Go package of acp-runner, built with CGO_ENABLED=0")
	fs.StringVar(&opts.Release, "release", "bookworm", "Debian release of the rootfs")
	fs.BoolVar(&opts.Refresh, "refresh", false, "ignore every cache: download the packages again, re-import, rebuild")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	r, err := sandboximage.BuildDetailed(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s cached=%t base-cached=%t rootfs-cached=%t took=%s\n", r.Ref, r.ID, r.ImageCached, r.BaseCached, r.RootfsCached, r.Took.Round(1e6))
	return nil
}
