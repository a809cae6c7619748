package warmpool

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// imageIDFails is the engine with its image lookup failing while fail is
// set, as it does when the daemon stops (its context canceled) or the
// engine is slow to answer.
type imageIDFails struct {
	Engine
	fail atomic.Bool
}

func (e *imageIDFails) ImageID(ctx context.Context, ref string) (string, error) {
	if e.fail.Load() {
		return "", errors.New("inspect image: context canceled")
	}
	return e.Engine.ImageID(ctx, ref)
}

// TestAFailedImageLookupKeepsThePool: a pass that cannot learn its image's
// id keeps the sandboxes that wait; a daemon stopping mid-pass removed
// its whole pool as "its image changed".
func TestAFailedImageLookupKeepsThePool(t *testing.T) {
	if testing.Short() {
		t.Skip("real engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d, labels, img := poolEngine(t, ctx, "warmpool-imagefail-")
	eng := &imageIDFails{Engine: d}
	p := newHourPool(t, eng, labels)
	spec := engine.Spec{Name: "aimi-x", Image: img, MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20}
	p.SetTarget(spec, 1)
	p.pass(ctx)
	ids := waitIdle(t, p, spec, 1, nil)
	eng.fail.Store(true)
	p.pass(ctx)
	eng.fail.Store(false)
	infos, err := d.List(ctx, p.poolLabels(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].ID != ids[0] {
		t.Fatalf("after a pass whose image lookup failed the pool holds %v, want its sandbox %s", infos, ids[0])
	}
}

// poolEngine is the real engine for one pool test: its owner labels (the
// test run's, and a daemon named daemon plus the run), the stand-in's
// image, and everything labelled with the run removed when the test ends.
func poolEngine(t *testing.T, ctx context.Context, daemon string) (d *container.Docker, labels map[string]string, img string) {
	t.Helper()
	run := dockertest.RunID()
	labels = map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: daemon + run}
	img = dockertest.BuildGoImage(t, ctx, map[string]string{"/standin": standin}, nil, nil)
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	d, err := container.NewDocker(ctx, container.WithOwner(map[string]string{contract.LabelDaemon: labels[contract.LabelDaemon]}))
	if err != nil {
		t.Fatal(err)
	}
	return d, labels, img
}

// newHourPool is a pool on eng whose sandboxes may wait an hour, logging
// at debug level to stderr.
func newHourPool(t *testing.T, eng Engine, labels map[string]string) *Pool {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := New(eng, Options{Dir: t.TempDir(), Labels: labels, MaxAge: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countCreates is the engine counting its creates.
type countCreates struct {
	Engine
	n atomic.Int32
}

func (e *countCreates) Create(ctx context.Context, s engine.Spec) (string, error) {
	e.n.Add(1)
	return e.Engine.Create(ctx, s)
}

// TestAPoolOfAMissingImageCreatesNothing: a target whose image is gone
// (removed by hand, or a workspace image lost) makes no create at every
// pass, each failing the same way: the pool waits for a target or an
// image again.
func TestAPoolOfAMissingImageCreatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("real engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d, labels, _ := poolEngine(t, ctx, "warmpool-missing-")
	eng := &countCreates{Engine: d}
	p := newHourPool(t, eng, labels)
	spec := engine.Spec{Name: "aimi-x", Image: "aimi-test/no-such-image:" + dockertest.RunID(), MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20}
	p.SetTarget(spec, 2)
	for range 3 {
		p.pass(ctx)
	}
	if n := eng.n.Load(); n != 0 {
		t.Fatalf("%d creates of a missing image, want none", n)
	}
}
