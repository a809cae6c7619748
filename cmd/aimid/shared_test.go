package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// The end-to-end tests of this package wait on containers and daemons far
// more than they compute: each starts with parallel(t) (or parallelLong,
// or parallelCluster), and e2eSlots of them run at once. go test's own
// -parallel limit (GOMAXPROCS, 2 here) is raised out of the way by
// TestMain unless the command line sets one.
const e2eSlots = 8

// clusterSlots is how many of the e2eSlots the tests on the shared Swarm
// mode cluster may hold at once. Its three engines run inside containers
// beside everything else on two cores: six tests on it at once, next to
// another package's tests (when its engines still used vfs), starved its managers until the nodes missed their
// heartbeats and were marked down (NODE_LOST) and calls timed out.
const clusterSlots = 3

// clusterWork bounds a cluster test's wait for its containers' work: a
// few seconds on a quiet machine, minutes when the suite's other packages
// load the two cores (the nodes' engines run inside containers there).
const clusterWork = 6 * time.Minute

// raiseParallel sets -test.parallel high (the slots are the limit) unless
// it was given. TestMain calls it before m.Run, which reads the flag.
func raiseParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "1000")
	}
}

// testKind orders the tests for their slots: the cluster's tests first
// (they share one cluster, at most clusterSlots at a time, so they are
// the longest chain), those that need the cluster to themselves before
// those that share it, then the long ones (a long test left to start
// last would run alone at the end), then the rest.
type testKind int

const (
	kindShort testKind = iota
	kindLong
	kindCluster
	kindClusterAlone
	kinds
)

// slots hands the package's e2eSlots to its parallel tests in the order
// of their kinds.
type slots struct {
	mu   sync.Mutex
	cond *sync.Cond
	free int
	// pending counts the tests of each kind not yet given a slot. They
	// count themselves before t.Parallel: go test starts every top-level
	// test up to its t.Parallel, in turn, before it resumes any of them,
	// so every test is counted before any asks for a slot.
	pending [kinds]int
	// onCluster counts the cluster's tests holding a slot; alone says
	// one of them has the cluster to itself.
	onCluster int
	alone     bool
}

var e2e = func() *slots {
	s := &slots{free: e2eSlots}
	s.cond = sync.NewCond(&s.mu)
	return s
}()

// parallel runs t in parallel with the package's other tests, in one of
// the e2eSlots.
func parallel(t *testing.T) { e2e.run(t, kindShort) }

// parallelLong is parallel for a test of minutes: it gets a slot before
// the short tests.
func parallelLong(t *testing.T) { e2e.run(t, kindLong) }

// parallelCluster is parallel for a test on the shared Swarm mode
// cluster (testCluster): it gets a slot before the others while fewer
// than clusterSlots of the cluster's tests run.
func parallelCluster(t *testing.T) { e2e.run(t, kindCluster) }

// parallelClusterAlone is parallel for a test that needs the cluster to
// itself (testClusterAlone): it gets a slot when no other test is on the
// cluster, and no test sharing the cluster starts before it. Waiting for
// the cluster before the slot keeps the slot from being held idle (by a
// test blocked in testClusterAlone) while the cluster's other tests end.
func parallelClusterAlone(t *testing.T) { e2e.run(t, kindClusterAlone) }

// clusterWaits reports whether a test of kind k (a cluster kind) must
// wait for the cluster.
func (s *slots) clusterWaits(k testKind) bool {
	if k == kindClusterAlone {
		return s.alone || s.onCluster > 0
	}
	return s.alone || s.pending[kindClusterAlone] > 0 || s.onCluster >= clusterSlots
}

// mustWait reports whether a test of kind k waits for a slot: none is
// free, the cluster is not its to take, or a test of a kind before k
// could take the slot (a cluster test waiting for the cluster does not
// hold the others back).
func (s *slots) mustWait(k testKind) bool {
	clusterReady := (s.pending[kindClusterAlone] > 0 && !s.clusterWaits(kindClusterAlone)) ||
		(s.pending[kindCluster] > 0 && !s.clusterWaits(kindCluster))
	switch {
	case s.free == 0:
		return true
	case k == kindCluster || k == kindClusterAlone:
		return s.clusterWaits(k)
	case k == kindLong:
		return clusterReady
	default:
		return clusterReady || s.pending[kindLong] > 0
	}
}

func (s *slots) run(t *testing.T, k testKind) {
	s.mu.Lock()
	s.pending[k]++
	s.mu.Unlock()
	t.Parallel()
	asked := time.Now()
	s.mu.Lock()
	for s.mustWait(k) {
		s.cond.Wait()
	}
	// With -v, where the package's time goes: a test's elapsed time
	// includes this wait.
	t.Logf("e2e slot after %s", time.Since(asked).Round(time.Millisecond))
	s.free--
	s.pending[k]--
	if k == kindCluster || k == kindClusterAlone {
		s.onCluster++
		s.alone = k == kindClusterAlone
	}
	s.mu.Unlock()
	s.cond.Broadcast() // the last of a kind lets the next kind in
	// Registered first, so it runs last: the test's daemon and containers
	// are gone before the next test starts.
	t.Cleanup(func() {
		s.mu.Lock()
		s.free++
		if k == kindCluster || k == kindClusterAlone {
			s.onCluster--
			s.alone = s.alone && k != kindClusterAlone
		}
		s.mu.Unlock()
		s.cond.Broadcast()
	})
}

// The images the tests share: each is built once, by the first test that
// asks for it, and removed by TestMain after the last test (every test
// removes its containers in its own cleanup, before that).
var (
	imagesOnce sync.Once
	imagesCli  *client.Client
	imagesErr  error

	standinOnce   sync.Once
	standinTag    string
	standinRemove func(context.Context) error
	standinErr    error

	sandboxOnce sync.Once
	sandboxTag  string
	sandboxErr  error
)

// imagesClient is the client the shared images are built and removed with.
func imagesClient() (*client.Client, error) {
	imagesOnce.Do(func() { imagesCli, imagesErr = dockertest.NewClient() })
	return imagesCli, imagesErr
}

// standinImage is the orchestrator's scripted stand-in runner, shared.
func standinImage(t testing.TB) string {
	t.Helper()
	dockertest.Client(t) // no engine: fail, or skip under AIMI_SKIP_DOCKER=1
	standinOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cli, err := imagesClient()
		if err != nil {
			standinErr = err
			return
		}
		dir, err := os.MkdirTemp("", "aimid-standin-")
		if err != nil {
			standinErr = err
			return
		}
		defer os.RemoveAll(dir)
		standinTag, standinRemove, standinErr = dockertest.BuildGoImageE(ctx, cli, "aimid-standin", dir,
			map[string]string{"/standin": "github.com/aimi-tools/swarm/orchestrator/internal/standin"}, nil, nil)
	})
	if standinErr != nil {
		t.Fatalf("build the stand-in image: %v", standinErr)
	}
	return standinTag
}

// sandboxImage is the sandbox image built from the current ./cmd/acp-runner
// (sandboxtest.Image's, under one tag for the whole package), shared.
func sandboxImage(t testing.TB) string {
	t.Helper()
	dockertest.Client(t)
	sandboxOnce.Do(func() {
		cli, err := imagesClient()
		if err != nil {
			sandboxErr = err
			return
		}
		// A cold build downloads the Debian packages: generous bound.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		r, err := sandboximage.BuildDetailed(ctx, sandboximage.Options{Tag: "aimi-sandbox:test-" + dockertest.RunID(), Client: cli})
		if err != nil {
			sandboxErr = fmt.Errorf("build the sandbox image: %w", err)
			return
		}
		sandboxTag = r.Ref
	})
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandboxTag
}

// removeImages is TestMain's: the shared images go after the last test.
func removeImages() {
	if imagesCli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if standinRemove != nil {
		if err := standinRemove(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "remove the stand-in image:", err)
		}
	}
	if sandboxTag != "" {
		if err := sandboximage.RemoveTag(ctx, imagesCli, "", sandboxTag); err != nil {
			fmt.Fprintln(os.Stderr, "remove the sandbox image tag:", err)
		}
	}
	imagesCli.Close()
}
