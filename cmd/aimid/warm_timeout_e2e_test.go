package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// TestWarmPoolClaimedSandboxHasItsWholeTimeLimit: a sandbox that waited in
// the pool longer than swarm.timeout still gets the whole limit from its
// claim on, as a created container does from its start: its one story
// completes instead of being stopped as timed out at once.
func TestWarmPoolClaimedSandboxHasItsWholeTimeLimit(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	const limit = 15 * time.Second
	image := sandboxImage(t)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+dockertest.RunID())))[:6]
	repo := warmTestRepo(t, "wt-"+sfx)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	p := startWarmAimid(t, sock, filepath.Join(dir, "data"), image, "unused-secret",
		"AIMI_SANDBOX_WARM_POOL=1", "AIMI_SWARM_TIMEOUT="+limit.String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	pool := waitPool(t, ctx, cli, instance, 1, p)
	started, err := time.Parse(time.RFC3339Nano, pool[0].State.StartedAt)
	if err != nil {
		t.Fatal(err)
	}
	// The pool sandbox's age passes the limit (a wait on the clock).
	for time.Since(started) < limit+2*time.Second {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Until(started.Add(limit + 2*time.Second))):
		}
	}
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 3*time.Minute, "the container exited", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && allExited(v)
	})
	sw := validState(t, repo)
	c := sw.Containers[0]
	if !hasWarmNote(t, repo, sw.SwarmID, c.ContainerName) {
		t.Fatalf("%s was not claimed from the pool", c.ContainerName)
	}
	if c.Status != state.StatusCompleted {
		t.Errorf("%s: %s after a pool wait of more than swarm.timeout (%s), want completed: the limit counts from the claim; daemon log:\n%s",
			c.ContainerName, c.Status, limit, p.logs())
	}
}
