package gitserve

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// sandbox is the sandbox image (git + acp-runner) the container tests of
// this package share: built at most once per test binary under a
// run-unique tag, removed by TestMain.
var sandbox struct {
	once sync.Once
	tag  string
	err  error
}

// sandboxImage returns the shared image tag, failing the test with the
// reason when the image cannot be built: every input of the build is in the
// repository, so a failed build is a defect, not a missing prerequisite.
func sandboxImage(t *testing.T) string {
	t.Helper()
	cli := dockertest.Client(t) // fails (or skips) without an engine
	sandbox.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		tag := "aimi-sandbox:gitserve-test-" + dockertest.RunID()
		if _, err := sandboximage.BuildDetailed(ctx, sandboximage.Options{Tag: tag, Client: cli}); err != nil {
			sandbox.err = err
			return
		}
		sandbox.tag = tag
	})
	if sandbox.err != nil {
		t.Fatalf("build the sandbox image (git inside a container): %v", sandbox.err)
	}
	return sandbox.tag
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sandbox.tag != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cli, err := dockertest.NewClient()
		if err == nil {
			err = sandboximage.RemoveTag(ctx, cli, "", sandbox.tag)
			cli.Close()
		}
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "remove test image %s: %v\n", sandbox.tag, err)
		}
	}
	os.Exit(code)
}
