package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// TestWorkspaceImageKill9LeavesNothingBehind: aimid killed while it builds
// a repository's workspace image, and again in the middle of a fan-out of
// sandboxes of that image. After each restart no build container is left,
// every container of the daemon still has its image (the engine never
// lets one go under a container), the swarm saved before the kill
// completes on its workspace image, and once the swarm is cleaned up and
// the pool is off, a restart leaves no image of the daemon behind but the
// one it adopted.
func TestWorkspaceImageKill9LeavesNothingBehind(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	img := sandboxImage(t)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+dockertest.RunID())))[:6]
	first, second := []string{"kw1a-" + sfx, "kw1b-" + sfx}, []string{"kw2a-" + sfx, "kw2b-" + sfx, "kw2c-" + sfx}
	repo := projectRepo(t, first...)
	addTaskFiles(t, repo, second...)
	dir := shortDir(t)
	sock, data := filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	start := func(pool string) *proc {
		return launch(t, daemonOpts{Sock: sock, DataDir: data, Image: img, Local: true, Config: localConfig,
			Env: []string{"AIMI_SANDBOX_WARM_POOL=" + pool}})
	}
	files := func(names []string) string {
		var p []string
		for _, n := range names {
			p = append(p, ".aimi/tasks/"+n+"-tasks.json")
		}
		return strings.Join(p, ",")
	}

	// Killed while the image is built: as soon as its build container exists.
	p := start("2")
	// Not --follow: the build begins once the containers work, which may
	// be over before they are done.
	if code, out, errOut := aimi(ctx, "swarm", "start", "--local", "--files", files(first), "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	testwait.Eventually(t, 3*time.Minute, "a workspace image's build container", func() error {
		if len(buildContainers(t, ctx, cli, instance)) == 0 {
			return fmt.Errorf("none; daemon log:\n%s", p.logs())
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
	kill9(t, p)
	p = start("2")
	checkNoSandboxWithoutItsImage(t, ctx, cli, instance)
	if n := len(buildContainers(t, ctx, cli, instance)); n > 0 {
		t.Errorf("%d build containers outlived the restart", n)
	}
	// The next start builds it again; then the pool fills with it.
	if code, out, errOut := aimi(ctx, "swarm", "start", "--force", "--follow", "--local", "--files", files(first[:1]), "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitWorkspacePool(t, ctx, cli, instance, 2, p)

	// Killed mid fan-out: once the state file holds the start's containers.
	done := make(chan struct{})
	go func() {
		defer close(done)
		aimi(ctx, "swarm", "start", "--force", "--local", "--files", files(second), "--repo", repo, "--socket", sock)
	}()
	testwait.Eventually(t, 2*time.Minute, "the fan-out's state saved", testwait.True(func() bool {
		sw, err := state.Open(repo).Load(ctx)
		return err == nil && len(sw.Containers) == len(second) && strings.Contains(sw.Containers[0].ContainerName, "kw2")
	}), testwait.Every(2*time.Millisecond))
	kill9(t, p)
	<-done
	checkNoSandboxWithoutItsImage(t, ctx, cli, instance)
	p = start("0")
	v := waitFor(t, sock, repo, 5*time.Minute, "every container of the saved swarm exited", func(v api.SwarmView) bool { return allExited(v) })
	for i, c := range v.State.Containers {
		if c.Status != state.StatusCompleted {
			t.Errorf("%s ended %s after the kill: %+v", c.ContainerName, c.Status, v.Containers[i].Errors)
		}
	}
	checkNoSandboxWithoutItsImage(t, ctx, cli, instance)

	p = cleanupLeavesNoImage(t, ctx, cli, p, sock, repo, instance, func() *proc { return start("0") })
	p.stop(t)
}

// cleanupLeavesNoImage: once the swarm of repo is cleaned up and the pool
// (sandbox.warm_pool 0 on the daemon p) is empty, the daemon restart
// removes every image of its instance but the repository's one it
// adopts. It returns the restarted daemon.
func cleanupLeavesNoImage(t *testing.T, ctx context.Context, cli *client.Client, p *proc, sock, repo, instance string, restart func() *proc) *proc {
	t.Helper()
	if code, out, errOut := aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	testwait.Eventually(t, 2*time.Minute, "the pool emptied (sandbox.warm_pool 0)", func() error {
		if n := len(warmSandboxes(t, ctx, cli, instance)); n > 0 {
			return fmt.Errorf("%d pool sandboxes left", n)
		}
		return nil
	})
	p.stop(t)
	p = restart()
	testwait.Eventually(t, time.Minute, "no workspace image of the daemon left", func() error {
		ims, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"="+instance))})
		if err != nil {
			return err
		}
		var left []string
		for _, im := range ims {
			if len(im.RepoTags) != 1 || !strings.Contains(p.logs(), "image="+im.RepoTags[0]) || !strings.Contains(p.logs(), "workspace image adopted") {
				left = append(left, fmt.Sprint(im.RepoTags))
			}
		}
		if len(left) > 0 || len(ims) > 1 {
			return fmt.Errorf("%d images, %d not adopted: %v; daemon log:\n%s", len(ims), len(left), left, p.logs())
		}
		return nil
	})
	return p
}

// buildContainers are the workspace image build containers of the daemon
// instance (they carry the image's labels, its instance among them).
func buildContainers(t testing.TB, ctx context.Context, cli *client.Client, instance string) []dcontainer.Summary {
	t.Helper()
	cs, err := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("name", contract.WorkspaceBuildPrefix), filters.Arg("label", contract.LabelDaemon+"="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkNoSandboxWithoutItsImage: every container of instance runs on an
// image the engine still has.
func checkNoSandboxWithoutItsImage(t testing.TB, ctx context.Context, cli *client.Client, instance string) {
	t.Helper()
	cs, err := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if _, err := cli.ImageInspect(ctx, c.ImageID); err != nil {
			t.Errorf("%v runs on an image the engine no longer has: %v", c.Names, err)
		}
	}
}
