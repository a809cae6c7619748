package aimid

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/aimi-tools/swarm/land"
)

// EnvLandPause, a land.Point or "<point>:<container>", stops every land
// at that step (of that container's branch) until its request ends: a
// test hook, so that a crash test kills the daemon at a known point of a
// land. The daemon's own environment only: no sandbox, agent or task file
// can set it.
const EnvLandPause = "AIMI_TEST_LAND_PAUSE"

// LogLandPaused is the message the daemon logs when a land stops at the
// point EnvLandPause names (the crash tests wait for it).
const LogLandPaused = "land paused (a test hook)"

// landPause is the land.Hook EnvLandPause asks for, nil without it.
func landPause(log *slog.Logger) land.Hook {
	v := os.Getenv(EnvLandPause)
	if v == "" {
		return nil
	}
	point, only, _ := strings.Cut(v, ":")
	at := land.Point(point)
	log.Warn("lands stop at a point (a test hook)", "env", EnvLandPause, "point", at, "container", only)
	return func(ctx context.Context, p land.Point, container string) {
		if p != at || (only != "" && container != only) {
			return
		}
		log.Warn(LogLandPaused, "point", p, "container", container)
		<-ctx.Done()
	}
}
