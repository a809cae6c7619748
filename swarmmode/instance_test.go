package swarmmode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/swarmmode"
)

// Service names carry the instance and swarm, stay within Swarm's 63
// characters whatever the container name, and differ for any difference.
func TestServiceNameBoundedAndDistinct(t *testing.T) {
	long := "aimi-" + strings.Repeat("x", 120)
	seen := map[string]bool{}
	for _, in := range [][3]string{{"a", "s1", "aimi-t"}, {"b", "s1", "aimi-t"}, {"a", "s2", "aimi-t"}, {"a", "s1", long}, {"a", "s1", long + "y"}, {"", "", "aimi-ü"}} {
		n := swarmmode.ServiceName(in[0], contract.Sandbox{Swarm: in[1], Container: in[2]})
		if len(n) > 63 || seen[n] || !strings.HasPrefix(n, "aimi-") {
			t.Errorf("ServiceName%q = %q: too long, a repeat, or not readable", in, n)
		}
		seen[n] = true
	}
}

func instanceEngine(t *testing.T, instance string) *swarmmode.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := swarmmode.New(ctx, cluster.Manager().Client, swarmmode.Options{HostAddr: cluster.Gateway, StopGrace: 5 * time.Second, Poll: 200 * time.Millisecond, Instance: instance, NodeHost: cluster.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Two daemons (instances) on one cluster start sandboxes of the same
// container name: neither replaces, lists, stops or removes the other's,
// and a create of one that fails half-way takes back only what it made.
// Both run to their own exit with their own secret.
func TestInstancesKeepApartOnOneCluster(t *testing.T) {
	t.Parallel()
	_, c := newEngine(t)
	a, b := instanceEngine(t, "ia-"+c.RunID), instanceEngine(t, "ib-"+c.RunID)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mk := func(e *swarmmode.Engine, swarmID, secret string) engine.Spec {
		s := spec(t, "aimi-shared", "PROBE_SECRET="+secret)
		s.Labels[contract.LabelSwarmID] = swarmID
		return s
	}
	sa, sb := "swarm-a-"+c.RunID, "swarm-b-"+c.RunID
	idA, err := a.Create(ctx, mk(a, sa, "secret-a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Remove(context.Background(), idA) })
	// B's create that fails after storing its secret must not take A's.
	bad := mk(b, sb, "secret-b")
	bad.Mounts = []engine.Mount{{Source: "/nonexistent/ca.pem", Target: "/etc/x.pem", ReadOnly: true}}
	if _, err := b.Create(ctx, bad); err == nil {
		t.Fatal("create with a missing file succeeded")
	}
	idB, err := b.Create(ctx, mk(b, sb, "secret-b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), idB) })
	if idA == idB {
		t.Fatalf("both instances got sandbox id %s", idA)
	}
	if info, err := a.Inspect(ctx, idA); err != nil || info.Status != "created" {
		t.Fatalf("A's sandbox after B's creates: %+v, %v", info, err)
	}
	if l, err := b.List(ctx, map[string]string{contract.LabelSwarmID: sa}); err != nil || len(l) != 0 {
		t.Fatalf("B lists A's sandboxes: %+v, %v", l, err)
	}
	if _, err := b.Inspect(ctx, idA); err == nil {
		t.Fatal("B inspects A's sandbox by id")
	}
	if err := b.Remove(ctx, idA); err != nil {
		t.Fatalf("B's remove of A's id: %v", err)
	}
	if err := b.Stop(ctx, idA, time.Second); err == nil {
		t.Fatal("B stopped A's sandbox")
	}
	exitA, exitB := a.Wait(ctx, idA), b.Wait(ctx, idB)
	for _, x := range []struct {
		e  *swarmmode.Engine
		id string
	}{{a, idA}, {b, idB}} {
		if err := x.e.WriteStdin(ctx, x.id, request(t, map[string]any{"exit": 3})); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range []<-chan engine.Exit{exitA, exitB} {
		if ex := <-ch; ex.Err != nil || ex.Code != 3 {
			t.Fatalf("sandbox %d: exit %+v", i, ex)
		}
	}
	waitFor(t, ctx, a, idA, "secret secret-a")
	waitFor(t, ctx, b, idB, "secret secret-b")
	// B's remove by name removes B's own sandbox only.
	if err := b.Remove(ctx, "aimi-shared"); err != nil {
		t.Fatal(err)
	}
	checkBsRemovalLeftAs(t, ctx, c, a, idA)
}

// checkBsRemovalLeftAs checks that after instance B's remove by the shared
// name, instance A's secret, network and sandbox idA are there and B left
// no secret or config.
func checkBsRemovalLeftAs(t *testing.T, ctx context.Context, c *clustertest.Cluster, a *swarmmode.Engine, idA string) {
	t.Helper()
	m := c.Manager().Client
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"=aimi-shared"), filters.Arg("label", contract.LabelDaemon+"=ia-"+c.RunID))
	if s, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: f}); len(s) != 1 {
		t.Errorf("A's secrets after B's removal: %d, want 1", len(s))
	}
	if n, _ := m.NetworkList(ctx, network.ListOptions{Filters: f}); len(n) != 1 {
		t.Errorf("A's networks after B's removal: %d, want 1", len(n))
	}
	if info, err := a.Inspect(ctx, "aimi-shared"); err != nil || info.ID != idA || info.Status != "exited" {
		t.Fatalf("A's sandbox after B's removal: %+v, %v", info, err)
	}
	fb := filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"=ib-"+c.RunID))
	if s, _ := m.SecretList(ctx, swarm.SecretListOptions{Filters: fb}); len(s) != 0 {
		t.Errorf("B left %d secrets", len(s))
	}
	if s, _ := m.ConfigList(ctx, swarm.ConfigListOptions{Filters: fb}); len(s) != 0 {
		t.Errorf("B left %d configs", len(s))
	}
}
