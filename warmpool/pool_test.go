package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// standin is a runner that waits on stdin (the orchestrator's stand-in).
const standin = "github.com/aimi-tools/swarm/orchestrator/internal/standin"

// waitIdle waits until the pool of key holds n idle sandboxes that all
// differ from not, and returns them.
func waitIdle(t *testing.T, p *Pool, spec engine.Spec, n int, not map[string]bool) []string {
	t.Helper()
	var ids []string
	testwait.Eventually(t, 3*time.Minute, fmt.Sprintf("%d idle sandboxes other than %v", n, not), func() error {
		p.mu.Lock()
		ids = append([]string(nil), p.idle[Key(spec)]...)
		p.mu.Unlock()
		fresh := len(ids) == n
		for _, id := range ids {
			fresh = fresh && !not[id]
		}
		if !fresh {
			return fmt.Errorf("pool holds %v", ids)
		}
		return nil
	})
	return ids
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
	claimTakenName(t, ctx, d, p, claimSpec, labels)
	claimedFrom := time.Now()
	got, ok, err := p.Claim(ctx, claimSpec)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	id := got.ID
	claimStartsItsTime(t, ctx, p, got, claimedFrom)
	if got.Name != claimSpec.Name || !got.Running {
		t.Errorf("the claim answered %q running %v, want %q running", got.Name, got.Running, claimSpec.Name)
	}
	in, _ := cli.ContainerInspect(ctx, id)
	if in.Name != "/"+claimSpec.Name || in.NetworkSettings.Networks[net.Name] == nil {
		t.Fatalf("claimed sandbox %s on %v", in.Name, in.NetworkSettings.Networks)
	}
	checkHalfClaimTakenBack(t, ctx, cli, d, opts, id, net.Name)
	_ = d.RemoveNetworkIfUnused(ctx, net.Name)
}

// checkHalfClaimTakenBack reconciles a new pool with opts: the sandbox id,
// claimed but never saved in a state file, is back in the pool under a
// warm name and off netName, and a drain removes it.
func checkHalfClaimTakenBack(t *testing.T, ctx context.Context, cli *client.Client, d *container.Docker, opts Options, id, netName string) {
	t.Helper()
	p2, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	in, _ := cli.ContainerInspect(ctx, id)
	if !strings.HasPrefix(in.Name, "/aimi-warm-") || len(in.NetworkSettings.Networks) > 1 || in.NetworkSettings.Networks[netName] != nil || p2.Claimed(id) {
		t.Fatalf("half-claimed sandbox not back in the pool: %s on %v", in.Name, in.NetworkSettings.Networks)
	}
	if n, err := p2.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("drain removed %d: %v", n, err)
	}
}

// claimTakenName: a claim under a name another container holds answers
// engine.ErrConflict and leaves the sandbox free for the next claim (it
// stayed marked as being taken, so the next Reconcile left it out of the
// idle list for good and made another).
func claimTakenName(t *testing.T, ctx context.Context, d *container.Docker, p *Pool, s engine.Spec, labels map[string]string) {
	t.Helper()
	taken := s
	taken.Name, taken.Network, taken.Labels = s.Name+"-taken", "", labels
	holder, err := d.Create(ctx, taken)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove(context.WithoutCancel(ctx), holder)
	s.Name = taken.Name
	if _, ok, err := p.Claim(ctx, s); ok || !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a claim under a name another container holds: ok %v, err %v; want engine.ErrConflict", ok, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.taking) != 0 || len(p.idle[Key(s)]) != 1 {
		t.Errorf("after a refused claim: %d sandboxes still being taken, %d idle; want 0 and 1", len(p.taking), len(p.idle[Key(s)]))
	}
}

// claimStartsItsTime: a claimed sandbox shows its claim as its start, as
// a container created for the swarm then would: the time it waited in the
// pool is no swarm's (a swarm's time limit, and the choice of the newest
// swarm when a state file is gone, go by it).
func claimStartsItsTime(t *testing.T, ctx context.Context, p *Pool, got engine.Info, claimedFrom time.Time) {
	t.Helper()
	seen, err := p.Overlay().Inspect(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, at := range map[string]time.Time{"the claim's answer": got.StartedAt, "an inspect": seen.StartedAt} {
		if at.Before(claimedFrom) {
			t.Errorf("%s says the claimed sandbox started at %s, before its claim at %s", what, at, claimedFrom)
		}
	}
}
