package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// TestOneRepositoryByTwoPathsIsOneSwarm asks the real daemon, through its
// API (the CLI would resolve the path first; another client may not), to
// start a swarm in a repository and, at the same moment, in a symlink to
// it: the daemon resolves both to one repository, so exactly one start
// succeeds, the other is refused as a start on an active swarm is, and
// every path (the symlink, a subdirectory) shows that one swarm.
func TestOneRepositoryByTwoPathsIsOneSwarm(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 2, "one")
	link := filepath.Join(shortDir(t), "repo-link")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	removeProjectContainersAtEnd(t, link) // what a daemon keyed by the link would leave
	sub := filepath.Join(repo, "src")
	os.MkdirAll(sub, 0o755)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": "trap;progress|US-001|in_progress|working;sleep|5m"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := daemon.NewClient(sock)
	defer c.Close()

	var wg sync.WaitGroup
	views := make([]api.SwarmView, 2)
	errs := make([]error, 2)
	for i, path := range []string{repo, link} {
		wg.Go(func() {
			views[i], errs[i] = c.Start(ctx, api.StartRequest{RepoPath: path, TaskFiles: []string{".aimi/tasks/one-tasks.json"}})
		})
	}
	wg.Wait()
	ok := 0
	var id string
	for i, err := range errs {
		var ae *api.APIError
		switch {
		case err == nil:
			ok++
			id = views[i].State.SwarmID
		case errors.As(err, &ae) && strings.Contains(err.Error(), "active swarm"):
		default:
			t.Errorf("start %d: %v", i, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d starts succeeded (%v), want exactly one", ok, errs)
	}
	for _, path := range []string{repo, link, sub} {
		v := waitFor(t, sock, path, 2*time.Minute, "the swarm running, seen from "+path, func(v api.SwarmView) bool {
			return len(v.State.Containers) == 1 && v.State.Containers[0].Status == "running"
		})
		if v.State.SwarmID != id || v.RepoPath != repo {
			t.Errorf("from %s: swarm %s in %s, want %s in %s", path, v.State.SwarmID, v.RepoPath, id, repo)
		}
	}
	if sw := validState(t, repo); sw.SwarmID != id || len(sw.Containers) != 1 {
		t.Errorf("state file: swarm %s with %d containers, want %s with 1", sw.SwarmID, len(sw.Containers), id)
	}
	// One container on the engine, labelled with the resolved path only.
	eng := dockertest.Client(t)
	for path, want := range map[string]int{repo: 1, link: 0} {
		list, err := eng.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", contract.LabelProject+"="+path))})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != want {
			t.Errorf("%d containers labelled %s, want %d", len(list), path, want)
		}
	}
	if _, err := c.Stop(ctx, link, nil); err != nil {
		t.Errorf("stop through the link: %v", err)
	}
	p.stop(t)
}
