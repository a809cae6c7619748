// Package sandboxtest gives tests a throw-away tag of the sandbox image
// (acp-runner + git + CA certificates), built or reused through package
// sandboximage, so no test touches the user's aimi-sandbox:latest.
package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// buildTimeout bounds a cold build (download of the Debian packages and
// import, about half a minute here) with a wide margin for a slow mirror.
const buildTimeout = 10 * time.Minute

// Image returns a tag naming the sandbox image built from the current
// ./cmd/acp-runner (reusing the cached rootfs and any image with the same
// content), removed again when the test ends. Fails the test (or skips it
// under AIMI_SKIP_DOCKER=1) when no engine answers.
func Image(t testing.TB) string {
	t.Helper()
	return ImageWith(t, sandboximage.Options{})
}

// ImageWith is Image with options (RunnerPackage, RunnerBinary, Env,
// Labels...); Tag and Client are set here.
func ImageWith(t testing.TB, opts sandboximage.Options) string {
	t.Helper()
	cli := dockertest.Client(t)
	opts.Tag = "aimi-sandbox:test-" + dockertest.RunID()
	opts.Client = cli
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	r, err := sandboximage.BuildDetailed(ctx, opts)
	if err != nil {
		t.Fatalf("build the sandbox image: %v", err)
	}
	t.Logf("sandbox image %s (%s): cached=%t base-cached=%t rootfs-cached=%t took=%s", r.Ref, r.ID, r.ImageCached, r.BaseCached, r.RootfsCached, r.Took)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sandboximage.RemoveTag(ctx, cli, opts.CacheDir, r.Ref); err != nil {
			t.Errorf("remove test image tag: %v", err)
		}
	})
	return r.Ref
}
