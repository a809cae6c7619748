package main

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// TestSwarmBackendTwoDaemonsSameNames: two daemons (two instances) on one
// cluster start task files of the same names at the same moment, in two
// repositories. Every container of both completes; the cleanup of one
// daemon's swarm leaves every service, secret, config and network of the
// other's, and its own cleanup leaves nothing of either behind.
func TestSwarmBackendTwoDaemonsSameNames(t *testing.T) {
	parallelCluster(t)
	image := standinImage(t)
	c := testCluster(t, image)
	config := "agent:\n  env:\n    STANDIN_SCRIPT: \"pace|1s;auto|2\"\ngit:\n  mode: remote\n"
	type side struct{ repo, sock string }
	var sides [2]side
	for i := range sides {
		repo := gitRepo(t, 2, "same1", "same2", "same3")
		dir := shortDir(t)
		sock := filepath.Join(dir, "aimid.sock")
		p := launch(t, daemonOpts{
			Sock:    sock,
			DataDir: filepath.Join(dir, "data"),
			Config:  config,
			Base:    cleanEnv(),
			Env:     swarmSettings(c, image),
		})
		defer p.stop(t)
		sides[i] = side{repo, sock}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", s.repo, "--socket", s.sock); code != 0 {
				t.Errorf("start in %s: exit %d %s", s.repo, code, errOut)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, s := range sides {
		v := waitFor(t, s.sock, s.repo, clusterWork, "every container terminal", func(v api.SwarmView) bool {
			return len(v.Containers) == 3 && allExited(v)
		})
		for _, d := range v.Containers {
			if d.Status != string(state.StatusCompleted) {
				t.Errorf("%s of %s: %s %+v", d.Name, s.repo, d.Status, d.Errors)
			}
		}
	}
	m := c.Manager().Client
	count := func(instance string) int { return instanceObjects(t, ctx, m, instance) }
	second := testInstance(sides[1].sock)
	before := count(second)
	if code, out, errOut := aimi(ctx, "swarm", "cleanup", "--repo", sides[0].repo, "--socket", sides[0].sock); code != 0 {
		t.Fatalf("cleanup of the first: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := objectsGone(t, ctx, m, testInstance(sides[0].sock)); n != 0 {
		t.Errorf("%d objects of the first daemon left after its cleanup", n)
	}
	if after := count(second); after != before || before == 0 {
		t.Errorf("the second daemon had %d objects before the first's cleanup, %d after", before, after)
	}
	if code, out, errOut := aimi(ctx, "swarm", "cleanup", "--repo", sides[1].repo, "--socket", sides[1].sock); code != 0 {
		t.Fatalf("cleanup of the second: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := objectsGone(t, ctx, m, second); n != 0 {
		t.Errorf("%d objects of the second daemon left after its cleanup", n)
	}
}

// objectsGone waits up to a minute for the daemon instance's objects on
// the manager m to be gone and returns how many are left. A node's own copy
// of an overlay network outlives the cluster's by the time the node takes
// to remove its task containers: seconds, longer under load.
func objectsGone(t *testing.T, ctx context.Context, m *client.Client, instance string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := instanceObjects(t, ctx, m, instance)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Second)
	}
}

// instanceObjects logs and counts the services, secrets, configs and
// networks of the daemon instance on the cluster's manager m.
func instanceObjects(t *testing.T, ctx context.Context, m *client.Client, instance string) int {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"="+instance))
	s, _ := m.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
	sec, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: f})
	cfg, _ := m.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	nets, _ := m.NetworkList(ctx, network.ListOptions{Filters: f})
	var names []string
	for _, o := range s {
		names = append(names, "service "+o.Spec.Name)
	}
	for _, o := range sec {
		names = append(names, "secret "+o.Spec.Name)
	}
	for _, o := range cfg {
		names = append(names, "config "+o.Spec.Name)
	}
	for _, o := range nets {
		names = append(names, "network "+o.Name)
	}
	t.Logf("objects of %s: %v", instance, names)
	return len(names)
}
