package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
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
	if c.Status == state.StatusCompleted {
		return
	}
	// Under a loaded machine the story itself may outlast the limit. The
	// claim then holds if the timeout came no sooner than the whole limit
	// after the claim; counted from the pool's start it would come at once.
	at, ok := timeoutReachedAt(p.logs(), c.ContainerName)
	if !ok {
		t.Fatalf("%s: %s after a pool wait of more than swarm.timeout (%s), want completed or timed out: daemon log:\n%s",
			c.ContainerName, c.Status, limit, p.logs())
	}
	if ran := at.Sub(c.CreatedAt); ran < limit-time.Second {
		t.Errorf("%s timed out %s after its claim, want the whole limit (%s) from the claim on; daemon log:\n%s",
			c.ContainerName, ran.Round(time.Millisecond), limit, p.logs())
	}
}

// timeoutReachedAt is the time of the daemon's "timeout reached" line for a
// container in its log (slog's text format).
func timeoutReachedAt(log, name string) (time.Time, bool) {
	for _, ln := range strings.Split(log, "\n") {
		if !strings.Contains(ln, `msg="timeout reached`) || !strings.Contains(ln, " container="+name) {
			continue
		}
		f := strings.Fields(ln)
		if len(f) == 0 || !strings.HasPrefix(f[0], "time=") {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}
