package clustertest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/dockertest"
)

// startTimeout bounds a cold start: building the node image from Debian
// packages (about a minute on a cold cache), three engines, the swarm and
// the image loads.
const startTimeout = 10 * time.Minute

// Run is a test package's TestMain body: it starts one cluster for the
// whole package, hands it to use (nil under AIMI_SKIP_DOCKER=1, so tests
// can skip), runs the tests, removes the cluster and returns the exit code.
func Run(m *testing.M, opts Options, use func(*Cluster)) int {
	if os.Getenv(dockertest.SkipEnv) == "1" {
		use(nil)
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustertest: start the test cluster:", err)
		return 1
	}
	use(c)
	code := m.Run()
	cctx, ccancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer ccancel()
	if err := c.Close(cctx); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest: remove the test cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Need returns the package's cluster, skipping the test when there is none
// (AIMI_SKIP_DOCKER=1).
func Need(t testing.TB, c *Cluster) *Cluster {
	t.Helper()
	if c == nil {
		t.Skipf("%s=1: skipping test that needs a Docker Swarm cluster", dockertest.SkipEnv)
	}
	return c
}
