package warmpool

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// standin is a runner that waits on stdin (the orchestrator's stand-in).
const standin = "github.com/aimi-tools/swarm/orchestrator/internal/standin"

// waitIdle waits until the pool of key holds n idle sandboxes that all
// differ from not, and returns them.
func waitIdle(t *testing.T, p *Pool, spec engine.Spec, n int, not map[string]bool) []string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p.mu.Lock()
		ids := append([]string(nil), p.idle[Key(spec)]...)
		p.mu.Unlock()
		fresh := len(ids) == n
		for _, id := range ids {
			fresh = fresh && !not[id]
		}
		if fresh {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %v, want %d other than %v", ids, n, not)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoolReplacesAgedDeadAndOutdatedSandboxesAndTakesHalfClaimsBack: the
// real engine; a pool of one replaces its sandbox when it outlives
// MaxAge, when it dies, and when its image's tag moves to a new build; a
// claim interrupted before its state file was saved goes back to the pool
// at the next Reconcile, off the network and under its pool name; Drain
// removes what waits.
func TestPoolReplacesAgedDeadAndOutdatedSandboxesAndTakesHalfClaimsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("real engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	labels := map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "warmpool-test-" + run}
	cli := dockertest.Client(t)
	a := dockertest.BuildGoImage(t, ctx, map[string]string{"/standin": standin}, nil, nil)
	tag := "aimi-test/warmpool-moving:" + run
	if err := cli.ImageTag(ctx, a, tag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{}) })
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	d, err := container.NewDocker(ctx, container.WithOwner(map[string]string{contract.LabelDaemon: labels[contract.LabelDaemon]}))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := Options{Dir: t.TempDir(), Labels: labels, MaxAge: 4 * time.Second, Logger: log}
	p, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := engine.Spec{Name: "aimi-x", Image: tag, MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20}
	p.SetTarget(spec, 1)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(pctx) }()
	defer func() { stop(); <-done }()

	first := waitIdle(t, p, spec, 1, nil)
	aged := waitIdle(t, p, spec, 1, map[string]bool{first[0]: true}) // older than MaxAge
	p.mu.Lock()
	p.maxAge = time.Hour // the rest must not age out
	p.mu.Unlock()
	if err := cli.ContainerKill(ctx, aged[0], "KILL"); err != nil {
		t.Fatal(err)
	}
	revived := waitIdle(t, p, spec, 1, map[string]bool{aged[0]: true})
	t.Run("moved", func(t *testing.T) {
		b := dockertest.BuildGoImage(t, ctx, map[string]string{"/standin": standin}, map[string][]byte{"/v2": []byte("2")}, nil)
		if err := cli.ImageTag(ctx, b, tag); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, p, spec, 1, map[string]bool{revived[0]: true})
	})
	stop()
	<-done

	// A claim whose start died before its state file was saved.
	net, err := d.EnsureNetwork(ctx, "aimi-warmtest-"+run[:8], labels)
	if err != nil {
		t.Fatal(err)
	}
	claimSpec := spec
	claimSpec.Name, claimSpec.Network = "aimi-warmtest-claimed-"+run[:8], net.Name
	claimSpec.Labels = map[string]string{contract.LabelProject: t.TempDir()}
	id, ok, err := p.Claim(ctx, claimSpec)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	in, _ := cli.ContainerInspect(ctx, id)
	if in.Name != "/"+claimSpec.Name || in.NetworkSettings.Networks[net.Name] == nil {
		t.Fatalf("claimed sandbox %s on %v", in.Name, in.NetworkSettings.Networks)
	}
	p2, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	in, _ = cli.ContainerInspect(ctx, id)
	if !strings.HasPrefix(in.Name, "/aimi-warm-") || len(in.NetworkSettings.Networks) > 1 || in.NetworkSettings.Networks[net.Name] != nil || p2.Claimed(id) {
		t.Fatalf("half-claimed sandbox not back in the pool: %s on %v", in.Name, in.NetworkSettings.Networks)
	}
	if n, err := p2.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("drain removed %d: %v", n, err)
	}
	_ = d.RemoveNetworkIfUnused(ctx, net.Name)
}
