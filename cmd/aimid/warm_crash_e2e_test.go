package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// kill9 ends aimid the hard way and waits for it.
func kill9(t testing.TB, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(t)
}

// checkPoolSettled: every pool sandbox of instance is either a container
// of a state file in states (named as the entry, on no network, its
// socket directory the pool's) or waiting in the pool (running, its pool
// name, on no network, nothing in its socket directory: a claim cut short
// leaves no socket behind).
func checkPoolSettled(t testing.TB, ctx context.Context, cli *client.Client, instance, data string, states []*state.Swarm) {
	t.Helper()
	entries := map[string]string{}
	for _, sw := range states {
		for _, c := range sw.Containers {
			entries[c.ContainerID] = c.ContainerName
		}
	}
	for _, in := range warmSandboxes(t, ctx, cli, instance) {
		if name, ok := entries[in.ID]; ok {
			if in.Name != "/"+name || onANetwork(in) || !poolSocketDir(in, data) {
				t.Errorf("claimed %s (entry %s): not complete (networks %v, mounts %v)", in.Name, name, in.NetworkSettings.Networks, in.Mounts)
			}
			continue
		}
		if !strings.HasPrefix(in.Name, "/aimi-warm-") || !in.State.Running || onANetwork(in) || !poolSocketDir(in, data) {
			t.Errorf("pool sandbox %s is neither a swarm's nor back in the pool (running %v, networks %v, mounts %v)", in.Name, in.State.Running, in.NetworkSettings.Networks, in.Mounts)
			continue
		}
		checkEmptySocketDir(t, in)
	}
}

// poolSocketDir reports whether in's socket directory is one of the pool's
// under the data directory data.
func poolSocketDir(in dcontainer.InspectResponse, data string) bool {
	for _, m := range in.Mounts {
		if m.Destination == contract.NetDir {
			return filepath.Dir(m.Source) == filepath.Join(data, "net", "warm")
		}
	}
	return false
}

func onANetwork(in dcontainer.InspectResponse) bool {
	for n := range in.NetworkSettings.Networks {
		if n != "none" {
			return true
		}
	}
	return false
}

// TestWarmPoolKill9MidFillAndMidClaimLosesNothing: aimid killed while its
// pool fills, then killed at several moments of a start that claims from
// the pool. After each restart every pool sandbox is a complete container
// of a saved swarm or back in the pool, the pool is full again, and every
// container a state file holds completes.
//
// Not parallel: it has only ever run alone (it was written so, with the
// pool's kill -9 fixes), killing its daemon at moments of a claim found by
// polling the engine and the state file; whether those moments are still
// caught beside the package's other tests is unproven. Once it has passed
// so, it becomes parallelLong (it takes minutes).
func TestWarmPoolKill9MidFillAndMidClaimLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxtest.Image(t)
	dir := shortDir(t)
	sock, data := filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	start := func() *proc { return startWarmAimid(t, sock, data, image, "unused-secret", "AIMI_SANDBOX_WARM_POOL=2") }

	// Mid-fill: killed as soon as its first pool sandbox exists.
	p := start()
	testwait.Eventually(t, 3*time.Minute, "a pool sandbox", func() error {
		if len(warmSandboxes(t, ctx, cli, instance)) == 0 {
			return fmt.Errorf("none; daemon log:\n%s", p.logs())
		}
		return nil
	}, testwait.Every(20*time.Millisecond))
	kill9(t, p)
	p = start()
	waitPool(t, ctx, cli, instance, 2, p)
	checkPoolSettled(t, ctx, cli, instance, data, nil)

	var states []*state.Swarm
	for i, when := range []string{"at once", "renamed", "saved", "served", "requested"} {
		sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(dir, i))))[:6]
		first := fmt.Sprintf("ka%d-%s", i, sfx)
		repo := warmTestRepo(t, first, fmt.Sprintf("kb%d-%s", i, sfx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock)
		}()
		killAt(t, ctx, cli, when, repo, data, "aimi-"+first)
		kill9(t, p)
		<-done
		p = start()
		if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); err == nil {
			v := waitFor(t, sock, repo, 5*time.Minute, "every container of the saved swarm exited", func(v api.SwarmView) bool {
				return allExited(v)
			})
			sw := validState(t, repo)
			for i, c := range v.State.Containers {
				if c.Status != state.StatusCompleted {
					t.Errorf("killed %s: %s ended %s: %+v", when, c.ContainerName, c.Status, v.Containers[i].Errors)
				}
			}
			states = append(states, sw)
			t.Logf("killed %s: the swarm was saved with %d containers; all completed", when, len(sw.Containers))
		} else {
			t.Logf("killed %s: before the state file was saved", when)
		}
		waitPool(t, ctx, cli, instance, 2, p)
		checkPoolSettled(t, ctx, cli, instance, data, states)
	}
	p.stop(t)
}

// killAt returns at the moment of a start to kill the daemon at: at once,
// once a claimed sandbox has its task's name (mid-claim, before the state
// file's save), once the state file holds a container (before its claim
// line), once a claimed sandbox's sockets are served in its pool
// directory (under the data directory data), or once a task-request is
// journaled.
func killAt(t testing.TB, ctx context.Context, cli *client.Client, when, repo, data, name string) {
	t.Helper()
	if when == "at once" {
		return
	}
	testwait.Eventually(t, 2*time.Minute, fmt.Sprintf("the start to reach %q", when), testwait.True(func() bool {
		switch when {
		case "renamed":
			_, err := cli.ContainerInspect(ctx, name)
			return err == nil
		case "served":
			socks, _ := filepath.Glob(filepath.Join(data, "net", "warm", "*", "*.sock"))
			return len(socks) > 0
		case "saved", "requested":
			sw, err := state.Open(repo).Load(ctx)
			if err != nil || len(sw.Containers) == 0 {
				return false
			}
			if when == "saved" {
				return true
			}
			recs, _ := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, sw.Containers[0].ContainerName+".ndjson"))
			return len(recs) > 0
		}
		return false
	}), testwait.Every(2*time.Millisecond))
}
