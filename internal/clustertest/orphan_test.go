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

	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// A cluster whose test process is gone (a panic ends a test binary before
// any cleanup) is removed by the next Start; one of a live process is not,
// nor one whose process is in another pid namespace or another boot (a
// shared host: the pid there names some other process here), nor one with
// only a pid to go by.
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
	self := instancelock.Self("", "", "")
	fake := func(pid int, d, proc string) string {
		run := dockertest.RunID()
		dockertest.Cleanup(t, dockertest.LabelKey, run)
		labels := map[string]string{dockertest.LabelKey: run, LabelCluster: run, labelOwner: strconv.Itoa(pid) + " " + d}
		if proc != "" {
			labels[labelOwnerProc] = proc
		}
		c, err := host.ContainerCreate(ctx, &container.Config{Image: imgs[0].ID, Labels: labels}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	// The gone process's start time is unknown now; any value differs
	// from what /proc says of that pid (nothing, or a later process).
	orphan := fake(gone.Process.Pid, dir, self.BootID+" "+self.PIDNS+" 1")
	keep := map[string]string{
		"live":              fake(os.Getpid(), filepath.Join(os.TempDir(), "aimi-cluster-live"), ownerProc()),
		"other pid ns":      fake(gone.Process.Pid, filepath.Join(os.TempDir(), "aimi-cluster-ns"), self.BootID+" pid:[1] 1"),
		"other boot":        fake(gone.Process.Pid, filepath.Join(os.TempDir(), "aimi-cluster-boot"), "another-boot "+self.PIDNS+" 1"),
		"pid only (legacy)": fake(gone.Process.Pid, filepath.Join(os.TempDir(), "aimi-cluster-old"), ""),
	}
	removeOrphans(ctx, host, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := host.ContainerInspect(ctx, orphan); err == nil {
		t.Error("the orphaned cluster's node is still there")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the orphaned cluster's socket dir is still there: %v", err)
	}
	for why, id := range keep {
		if _, err := host.ContainerInspect(ctx, id); err != nil {
			t.Errorf("the cluster of a process that is not known gone (%s) was removed: %v", why, err)
		}
	}
}
