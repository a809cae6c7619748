package swarmmode_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/swarmmode"
)

// removeBound is what removing one finished sandbox may take: a wait that
// runs to the engine's retry window (30 s) shows in every cleanup.
const removeBound = 10 * time.Second

// Removing a finished sandbox, plain or confined with a relay (what the
// daemon makes on a cluster), takes seconds, not the retry window, and
// leaves no service, secret, config or network of it.
func TestRemoveFinishedIsQuick(t *testing.T) {
	t.Parallel()
	e, c := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := c.Manager().Client
	for _, tc := range []struct {
		name  string
		relay bool
	}{{"aimi-rm-plain", false}, {"aimi-rm-relay", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(t, tc.name, "PROBE_SECRET=x")
			if tc.relay {
				s.Relay = &engine.Relay{Door: c.Gateway + ":1", Key: "k", CA: []byte("not really a CA"), Forward: "1=door"}
			}
			id := create(t, ctx, e, s)
			exit := e.Wait(ctx, id)
			if err := e.WriteStdin(ctx, id, request(t, map[string]any{"lines": 1})); err != nil {
				t.Fatal(err)
			}
			if ex := <-exit; ex.Err != nil || ex.Code != 0 {
				t.Fatalf("exit: %+v", ex)
			}
			began := time.Now()
			if err := e.Remove(ctx, id); err != nil {
				t.Fatal(err)
			}
			took := time.Since(began)
			t.Logf("remove took %s", took.Round(time.Millisecond))
			if took > removeBound {
				t.Errorf("remove took %s, want under %s", took.Round(time.Millisecond), removeBound)
			}
			f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+tc.name),
				filters.Arg("label", contract.LabelSwarmID+"=test-"+t.Name()))
			checkNothingLeft(t, ctx, m, f)
			// The managers delete a removed overlay at once; the manager
			// node's own copy of it (it ran the task) may be listed a
			// moment longer.
			testwait.Eventually(t, removeBound, "no network left after the removal", func() error {
				l, err := m.NetworkList(ctx, network.ListOptions{Filters: f})
				if err == nil && len(l) > 0 {
					err = fmt.Errorf("%d networks left", len(l))
				}
				return err
			})
		})
	}
}

// A finished sandbox removed by an engine that cannot reach the nodes'
// engines (no NodeHost): Swarm mode on engine 20.10 leaves its task
// container on its node, and Remove says so, by node and container,
// wrapping engine.ErrLeftOnNode; the container is there, as it says.
func TestRemoveSaysWhichContainerANodeKept(t *testing.T) {
	t.Parallel()
	c := clustertest.Need(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := swarmmode.New(ctx, c.Manager().Client, swarmmode.Options{HostAddr: c.Gateway, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	id := create(t, ctx, e, spec(t, "aimi-rm-kept"))
	exit := e.Wait(ctx, id)
	if err := e.WriteStdin(ctx, id, request(t, map[string]any{"lines": 1})); err != nil {
		t.Fatal(err)
	}
	if ex := <-exit; ex.Err != nil || ex.Code != 0 {
		t.Fatalf("exit: %+v", ex)
	}
	info, err := e.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"=aimi-rm-kept"), filters.Arg("label", contract.LabelSwarmID+"=test-"+t.Name()))
	var on *clustertest.Node
	var ctrID string
	for _, n := range c.Nodes {
		cs, err := n.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range cs {
			on, ctrID = n, ct.ID
			t.Cleanup(func() {
				_ = n.Client.ContainerRemove(context.Background(), ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			})
		}
	}
	if on == nil {
		t.Fatal("the finished task's container is on no node")
	}
	err = e.Remove(ctx, id)
	t.Logf("remove: %v", err)
	if !errors.Is(err, engine.ErrLeftOnNode) || !strings.Contains(err.Error(), "node "+info.Node+": container "+ctrID[:12]) || !strings.Contains(err.Error(), "engine.node_host") {
		t.Fatalf("remove: %v; want engine.ErrLeftOnNode naming node %s and container %.12s, and engine.node_host", err, info.Node, ctrID)
	}
	if _, err := on.Client.ContainerInspect(ctx, ctrID); err != nil {
		t.Errorf("the container Remove says its node kept: %v", err)
	}
	checkNothingLeft(t, ctx, c.Manager().Client, f)
}
