package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// zerosUnderManyNames is an exec agent whose first story writes one blob
// of 4 MiB of zeros under 12 names (48 MiB checked out, a few KiB pushed)
// and whose second breaks the pushes after it (pushesGoNowhere), so that
// the container ends failed with GIT_PUSH_FAILED.
const zerosUnderManyNames = `case "$AIMI_STORY_ID" in US-001) head -c 4194304 /dev/zero > z0 && for i in 1 2 3 4 5 6 7 8 9 10 11; do cp z0 z$i; done ;; ` +
	`*) ` + pushesGoNowhere + `; echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt" ;; esac`

// TestRerunOfAHugeCheckoutDoesNotFillTheDaemonsDisk: the real daemon in
// local git mode with git.max_workspace 8m, the real runner and an exec
// agent whose first story pushes a tiny push that checks out to 48 MiB
// (zerosUnderManyNames) and whose second's push fails. `aimi swarm resume
// --retry-failed` reruns the container on that branch: the daemon's data
// directory must never grow past the bound (it made no ready-made
// workspace of the branch, counted from git before writing) and the
// runner must have cloned instead.
func TestRerunOfAHugeCheckoutDoesNotFillTheDaemonsDisk(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	const bound = 8 << 20
	image := sandboxImage(t)
	name := "wsbig-" + dockertest.RunID()[:6]
	repo := historyRepo(t, 0, 0, name)
	writeCommitted(t, repo, name, taskFileJSON("feat/"+name, 2))
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: dataDir,
		Image:   image,
		Local:   true,
		Env: []string{
			"AIMI_GIT_MAX_WORKSPACE=8m", "AIMI_AGENT_KIND=exec", "AIMI_AGENT_COMMAND=" + zerosUnderManyNames,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 5*time.Minute, "the container exited", allExited)
	old := v.Containers[0]
	if old.Status != "failed" {
		t.Fatalf("%s ended %s (%+v), want failed after its first story", old.Name, old.Status, old.Errors)
	}
	before := dirBlocks(dataDir)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the checkout and its tar are gone once made: watch it grow
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), dirBlocks(dataDir)-before))
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	if code, out, errOut := aimi(ctx, "swarm", "resume", "--retry-failed", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("resume --retry-failed: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 5*time.Minute, "the rerun exited", func(v api.SwarmView) bool {
		return allExited(v) && len(v.Containers) == 1 && v.Containers[0].ContainerID != old.ContainerID
	})
	close(stop)
	<-sampled
	logs := p.logs()
	t.Logf("the data directory grew by %d bytes at most during the rerun", peak.Load())
	if grew := peak.Load(); grew > bound {
		t.Errorf("the daemon's data directory grew by %d bytes during the rerun, past git.max_workspace (%d)", grew, bound)
	}
	if !strings.Contains(logs, "no ready-made workspace; the runner clones") || !strings.Contains(logs, "git.max_workspace") {
		t.Errorf("the daemon did not send the rerun's runner to clone for git.max_workspace; log:\n%s", tail(logs, 6000))
	}
}

// dirBlocks is what the tree at root takes on disk (du), as far as it can
// be read while the daemon writes and removes files in it.
func dirBlocks(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
