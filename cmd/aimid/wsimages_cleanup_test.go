package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// launched are the daemon instances launch started in this test run: a
// local-mode start makes its repository's workspace image, which outlives
// a test that removes its containers by swarm (its sandboxes used it when
// the daemon stopped). TestMain removes them after the last test.
var launched sync.Map

// removeWorkspaceImages removes the workspace images and build containers
// of the daemons this run launched (each carries its instance's label).
func removeWorkspaceImages() {
	cli, err := dockertest.NewClient()
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	launched.Range(func(k, _ any) bool {
		own := filters.NewArgs(filters.Arg("label", contract.LabelDaemon+"="+k.(string)), filters.Arg("label", contract.LabelWorkspace+"=true"))
		cs, _ := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", contract.LabelDaemon+"="+k.(string)), filters.Arg("name", contract.WorkspaceBuildPrefix))})
		for _, c := range cs {
			_ = cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true})
		}
		ims, _ := cli.ImageList(ctx, image.ListOptions{All: true, Filters: own})
		for _, im := range ims {
			for _, ref := range append(im.RepoTags, im.ID) {
				if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
					fmt.Fprintln(os.Stderr, "remove a workspace image:", err)
				}
			}
		}
		return true
	})
}
