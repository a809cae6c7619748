package clustertest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/aimi-tools/swarm/internal/dockertest"
)

// A cluster whose test process is gone (a panic ends a test binary before
// any cleanup) is removed by the next Start; one of a live process is not.
func TestOrphanedClusterIsRemoved(t *testing.T) {
	host := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	imgs, err := host.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", NodeImageRepo))})
	if err != nil || len(imgs) == 0 {
		t.Fatalf("node image: %v", err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "aimi-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	fake := func(pid int, d string) (string, string) {
		run := dockertest.RunID()
		dockertest.Cleanup(t, dockertest.LabelKey, run)
		c, err := host.ContainerCreate(ctx, &container.Config{Image: imgs[0].ID, Labels: map[string]string{
			dockertest.LabelKey: run, LabelCluster: run, labelOwner: strconv.Itoa(pid) + " " + d,
		}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return run, c.ID
	}
	_, orphan := fake(gone.Process.Pid, dir)
	_, live := fake(os.Getpid(), filepath.Join(os.TempDir(), "aimi-cluster-live"))
	removeOrphans(ctx, host, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := host.ContainerInspect(ctx, orphan); err == nil {
		t.Error("the orphaned cluster's node is still there")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the orphaned cluster's socket dir is still there: %v", err)
	}
	if _, err := host.ContainerInspect(ctx, live); err != nil {
		t.Errorf("the cluster of a live process was removed: %v", err)
	}
}
