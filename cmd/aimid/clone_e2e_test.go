package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/state"
)

// largeHistory is the history the large-repository test and benchmark put
// behind the tip: 50 incompressible blobs of 4 MiB.
const (
	largeHistoryBlobs = 50
	largeHistoryBlob  = 4 << 20
)

// historyRepo is a checkout with no origin holding one committed one-story
// task file per name on main (as local git mode expects), with blobs
// incompressible blobs of blob bytes in main's history behind the tip.
func historyRepo(t testing.TB, blobs, blob int, names ...string) string {
	t.Helper()
	repo := shortDir(t)
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "task files"}} {
		gittest.Git(t, repo, args...)
	}
	if blobs > 0 {
		gittest.AddHistory(t, repo, "main", blobs, blob)
	}
	removeProjectContainersAtEnd(t, repo)
	return repo
}

// gitDirBytes is the size of the tar stream of the workspace's .git in a
// container (running or exited), read through the engine.
func gitDirBytes(t testing.TB, ctx context.Context, cli *client.Client, id string) int64 {
	t.Helper()
	rc, _, err := cli.CopyFromContainer(ctx, id, path.Join(contract.DefaultWorkspace, ".git"))
	if err != nil {
		t.Fatalf("read the workspace's .git of %s: %v", id, err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err != nil {
		t.Fatalf("read the workspace's .git of %s: %v", id, err)
	}
	return n
}

// firstWork is, per container of the swarm, when its first in_progress
// progress-update was written (the journal's record time).
func firstWork(t testing.TB, repo string, sw *state.Swarm) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, c := range sw.Containers {
		recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var m struct {
				Type    string `json:"type"`
				Payload struct {
					Status string `json:"status"`
				} `json:"payload"`
			}
			if r.Stream != "daemon" && json.Unmarshal(r.Message, &m) == nil && m.Type == "progress-update" && m.Payload.Status == "in_progress" {
				out[c.ContainerName] = r.Time
				break
			}
		}
	}
	return out
}

// TestLargeHistorySwarmClonesOnlyTheTip: a checkout whose main has 200 MiB
// of incompressible history behind a small tip runs a two-container swarm
// in local git mode with the real runner; both complete, publish their
// branches, and each container's workspace .git stays a small fraction of
// the history: the runner fetched the tip, not the history.
func TestLargeHistorySwarmClonesOnlyTheTip(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("makes a 200 MiB repository and runs real containers")
	}
	image := sandboxImage(t)
	made := time.Now()
	sfx := dockertest.RunID()[:6]
	names := []string{"big1-" + sfx, "big2-" + sfx}
	repo := historyRepo(t, largeHistoryBlobs, largeHistoryBlob, names...)
	t.Logf("%d MiB of history made in %s", largeHistoryBlobs*largeHistoryBlob>>20, time.Since(made).Round(time.Millisecond))

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--follow", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start --all --local --follow: exit %d\n%s\n%s\ndaemon log:\n%s", code, out, errOut, p.logs())
	}
	view := waitFor(t, sock, repo, 3*time.Minute, "every container exited", func(v api.SwarmView) bool {
		return len(v.Containers) == len(names) && allExited(v)
	})
	for _, d := range view.Containers {
		if *d.ExitCode != 0 || len(d.Errors) != 0 {
			t.Errorf("%s: exit %d errors %+v", d.Name, *d.ExitCode, d.Errors)
		}
	}
	sw := validState(t, repo)
	for name, at := range firstWork(t, repo, sw) {
		t.Logf("%s: first in_progress %s after start", name, at.Sub(start).Round(time.Millisecond))
	}
	cli := dockertest.Client(t)
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted {
			t.Errorf("%s: %s", c.ContainerName, c.Status)
		}
		n := gitDirBytes(t, ctx, cli, c.ContainerID)
		t.Logf("%s: workspace .git is %d KiB", c.ContainerName, n>>10)
		if n > largeHistoryBlobs*largeHistoryBlob/20 {
			t.Errorf("%s: the workspace's .git is %d bytes for %d bytes of history: the runner cloned the history", c.ContainerName, n, largeHistoryBlobs*largeHistoryBlob)
		}
	}
	var branches []string
	for _, n := range names {
		branches = append(branches, "feat/"+n)
	}
	waitBranchesPublished(t, repo, branches, time.Minute, p)
	for _, n := range names {
		if got := gitOut(t, repo, "rev-list", "--count", "main..feat/"+n); got == "0" {
			t.Errorf("feat/%s has no commit on top of main", n)
		}
	}
}
