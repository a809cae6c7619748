package aimid

import (
	"context"
	"log/slog"
	"os"

	"github.com/aimi-tools/swarm/land"
)

// EnvLandPause, a land.Point, stops every land at that step until its
// request ends: a test hook, so that a crash test kills the daemon at a
// known point of a land. The daemon's own environment only: no sandbox,
// agent or task file can set it.
const EnvLandPause = "AIMI_TEST_LAND_PAUSE"

// LogLandPaused is the message the daemon logs when a land stops at the
// point EnvLandPause names (the crash tests wait for it).
const LogLandPaused = "land paused (a test hook)"

// landPause is the land.Hook EnvLandPause asks for, nil without it.
func landPause(log *slog.Logger) land.Hook {
	at := land.Point(os.Getenv(EnvLandPause))
	if at == "" {
		return nil
	}
	log.Warn("lands stop at a point (a test hook)", "env", EnvLandPause, "point", at)
	return func(ctx context.Context, p land.Point, container string) {
		if p != at {
			return
		}
		log.Warn(LogLandPaused, "point", p, "container", container)
		<-ctx.Done()
	}
}
