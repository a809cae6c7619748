package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/workspace"
)

// wsRun is one test's daemon, repository and swarm starts of workspace
// images.
type wsRun struct {
	t              *testing.T
	ctx            context.Context
	cli            *client.Client
	img, repo, sfx string
	sock, data     string
	instance       string
}

func newWSRun(t *testing.T, ctx context.Context, prefixes ...string) *wsRun {
	t.Helper()
	w := &wsRun{t: t, ctx: ctx, cli: dockertest.Client(t), img: sandboxImage(t)}
	w.sfx = fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+dockertest.RunID())))[:6]
	w.repo = projectRepo(t, w.files(prefixes[0], 2)...)
	dir := shortDir(t)
	w.sock, w.data = filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	w.instance = testInstance(w.sock)
	dockertest.Cleanup(t, contract.LabelDaemon, w.instance)
	return w
}

// files are n task file names of round r.
func (w *wsRun) files(r string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%c-%s", r, 'a'+i, w.sfx))
	}
	return out
}

// launch starts the test's daemon on its data directory (pool of 2).
func (w *wsRun) launch() *proc {
	return launch(w.t, daemonOpts{Sock: w.sock, DataDir: w.data, Image: w.img, Local: true, Config: localConfig,
		Env: []string{"AIMI_SANDBOX_WARM_POOL=2"}})
}

// start runs a swarm of files to its end on p.
func (w *wsRun) start(p *proc, files []string) *state.Swarm {
	w.t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, ".aimi/tasks/"+f+"-tasks.json")
	}
	if code, out, errOut := aimi(w.ctx, "swarm", "start", "--force", "--follow", "--local", "--max", "4",
		"--files", strings.Join(paths, ","), "--repo", w.repo, "--socket", w.sock); code != 0 {
		w.t.Fatalf("start %v: exit %d\n%s\n%s\ndaemon log:\n%s", files, code, out, errOut, p.logs())
	}
	return validState(w.t, w.repo)
}

// waiting are the ids of the pool sandboxes of image waiting now.
func (w *wsRun) waiting(image string) []string {
	var ids []string
	for _, in := range waitingIn(warmSandboxes(w.t, w.ctx, w.cli, w.instance)) {
		if in.Config.Image == image {
			ids = append(ids, in.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// onImage: every container of sw runs on image.
func (w *wsRun) onImage(sw *state.Swarm, image string) {
	w.t.Helper()
	for _, c := range sw.Containers {
		in, err := w.cli.ContainerInspect(w.ctx, c.ContainerID)
		if err != nil {
			w.t.Fatal(err)
		}
		if in.Config.Image != image {
			w.t.Errorf("%s runs on %s, want the workspace image %s", c.ContainerName, in.Config.Image, image)
		}
	}
}

// TestWorkspaceImageAdoptedAfterARestart: aimid stopped (SIGTERM), and
// again killed (SIGKILL), once its repository's workspace image was built
// and its pool filled: the next aimid on the same data directory adopts
// the image (no build), the pool holds sandboxes of it right after the
// restart, and the next start's containers run on it, their runners at
// its commit ("from=image").
func TestWorkspaceImageAdoptedAfterARestart(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	w := newWSRun(t, ctx, "ad1")
	// Every round's task files are in the image's commit.
	addTaskFiles(t, w.repo, append(w.files("ad2", 2), w.files("ad3", 2)...)...)
	p := w.launch()
	w.start(p, w.files("ad1", 2))
	wsImage := waitWorkspacePool(t, ctx, w.cli, w.instance, 2, p)
	for _, r := range []struct {
		how   string
		stop  func(*proc)
		round string
	}{
		{"stopped", func(p *proc) { p.stop(t) }, "ad2"},
		{"killed", func(p *proc) { kill9(t, p) }, "ad3"},
	} {
		before := w.waiting(wsImage)
		r.stop(p)
		took := time.Now()
		p = w.launch()
		if got := waitWorkspacePool(t, ctx, w.cli, w.instance, 2, p); got != wsImage {
			t.Fatalf("%s: the pool after the restart holds sandboxes of %s, want the adopted %s", r.how, got, wsImage)
		}
		t.Logf("%s: the pool held 2 sandboxes of the adopted image %s after the restart; waiting before %v, after %v",
			r.how, time.Since(took).Round(time.Millisecond), before, w.waiting(wsImage))
		if !strings.Contains(p.logs(), "workspace image adopted") {
			t.Errorf("%s: the daemon does not say it adopted the image:\n%s", r.how, tail(p.logs(), 6000))
		}
		sw := w.start(p, w.files(r.round, 2))
		checkFrom(t, ctx, w.cli, w.repo, sw, "image", p)
		// Claimed sandboxes of the adopted image: the pool kept them.
		w.onImage(sw, wsImage)
		for _, c := range sw.Containers {
			if !hasWarmNote(t, w.repo, sw.SwarmID, c.ContainerName) {
				t.Errorf("%s: %s was created, not claimed from the pool", r.how, c.ContainerName)
			}
		}
		if strings.Contains(p.logs(), "workspace image built") {
			t.Errorf("%s: the daemon built the image again after the restart:\n%s", r.how, tail(p.logs(), 6000))
		}
	}
	p.stop(t)
}

// TestWorkspaceImageKeptWhileTheTipMovesLittle: starts on one repository
// with a few task files committed before each keep its workspace image
// (no build after them) and the pool's sandboxes of it (each start claims
// the very sandboxes that waited before it); a commit past
// workspace.RebuildPaths makes the next start rebuild it.
func TestWorkspaceImageKeptWhileTheTipMovesLittle(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	w := newWSRun(t, ctx, "kt1")
	p := w.launch()
	count := func(s string) int { return strings.Count(p.logs(), s) }
	w.start(p, w.files("kt1", 2))
	wsImage := waitWorkspacePool(t, ctx, w.cli, w.instance, 2, p)
	for i, round := range []string{"kt2", "kt3"} {
		addTaskFiles(t, w.repo, w.files(round, 2)...)
		before := w.waiting(wsImage)
		sw := w.start(p, w.files(round, 2))
		checkFrom(t, ctx, w.cli, w.repo, sw, "image+delta", p)
		checkSparse(t, ctx, w.cli, w.repo, sw)
		var claimed []string
		for _, c := range sw.Containers {
			claimed = append(claimed, c.ContainerID)
		}
		slices.Sort(claimed)
		if !slices.Equal(claimed, before) {
			t.Errorf("%s: its containers are %v, want the pool sandboxes that waited before it %v", round, claimed, before)
		}
		testwait.Eventually(t, 3*time.Minute, "the image kept after "+round, func() error {
			if n := count("workspace image stays at its commit"); n != i+1 {
				return fmt.Errorf("said %d times; daemon log:\n%s", n, tail(p.logs(), 6000))
			}
			return nil
		})
		if got := waitWorkspacePool(t, ctx, w.cli, w.instance, 2, p); got != wsImage {
			t.Fatalf("%s: the pool holds sandboxes of %s, want the kept %s", round, got, wsImage)
		}
		if n := count("workspace image built"); n != 1 {
			t.Errorf("%s: %d builds, want the first one only", round, n)
		}
	}
	// Past the threshold: the next start's build makes a new image.
	addBulk(t, w.repo, workspace.RebuildPaths+1)
	addTaskFiles(t, w.repo, w.files("kt4", 2)...)
	w.start(p, w.files("kt4", 2))
	testwait.Eventually(t, 3*time.Minute, "a second build past the threshold", func() error {
		if n := count("workspace image built"); n != 2 {
			return fmt.Errorf("%d builds; daemon log:\n%s", n, tail(p.logs(), 6000))
		}
		return nil
	})
	testwait.Eventually(t, 3*time.Minute, "the pool refilled with the new image", func() error {
		n := 0
		for _, in := range waitingIn(warmSandboxes(t, ctx, w.cli, w.instance)) {
			if contract.IsWorkspaceImage(in.Config.Image) && in.Config.Image != wsImage {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d sandboxes of a new image wait; daemon log:\n%s", n, tail(p.logs(), 6000))
		}
		return nil
	}, testwait.Every(500*time.Millisecond))
	p.stop(t)
}

// addBulk commits n small new files on main (a difference of n paths).
func addBulk(t testing.TB, repo string, n int) {
	t.Helper()
	bulk := filepath.Join(repo, "bulk", dockertest.RunID())
	if err := os.MkdirAll(bulk, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(bulk, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintln("bulk", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "bulk")
}

// checkSparse checks that each container of sw (new branches, their
// difference sparse) had only its own task file of the start in its
// workspace, and that its branch still holds every task file of the start
// as the start's commit had them, its own changed by its run.
func checkSparse(t *testing.T, ctx context.Context, cli *client.Client, repo string, sw *state.Swarm) {
	t.Helper()
	whole := wholeIndexBytes(t, repo, "main")
	for _, c := range sw.Containers {
		// The difference's index is split against the image's shared
		// part: the whole difference is smaller than the whole index.
		if n := deltaBytes(t, repo, sw.SwarmID, c.ContainerName); n <= 0 || n >= whole {
			t.Errorf("%s: the difference was %d bytes, the tip's whole index %d: want a split index", c.ContainerName, n, whole)
		}
		for _, o := range sw.Containers {
			rc, _, err := cli.CopyFromContainer(ctx, c.ContainerID, path.Join(contract.DefaultWorkspace, o.TaskFilePath))
			if err == nil {
				rc.Close()
			}
			if own := o.TaskFilePath == c.TaskFilePath; own != (err == nil) {
				t.Errorf("%s: %s in its workspace: %v (own %v)", c.ContainerName, o.TaskFilePath, err == nil, own)
			}
			if o.TaskFilePath == c.TaskFilePath {
				continue
			}
			if got, want := gittest.Git(t, repo, "rev-parse", c.BranchName+":"+o.TaskFilePath), gittest.Git(t, repo, "rev-parse", "main:"+o.TaskFilePath); got != want {
				t.Errorf("%s's branch holds %s as %s, the start's commit as %s", c.ContainerName, o.TaskFilePath, got, want)
			}
		}
		if d := gittest.Git(t, repo, "diff", "--name-only", "main", c.BranchName, "--", ".aimi/tasks"); d != c.TaskFilePath {
			t.Errorf("%s's branch changed task files %q, want only its own", c.ContainerName, d)
		}
	}
}

// wholeIndexBytes is the size of rev's whole index as the git service
// writes one (version 4, no stat data).
func wholeIndexBytes(t *testing.T, repo, rev string) int64 {
	t.Helper()
	index := filepath.Join(t.TempDir(), "index")
	cmd := exec.Command("git", "-c", "index.version=4", "read-tree", rev)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+index)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("read-tree %s: %v\n%s", rev, err, out)
	}
	fi, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// deltaBytes is the bytes= of the runner's "image workspace brought to
// the tip" line in a container's journal (-1: none).
func deltaBytes(t *testing.T, repo, swarmID, name string) int64 {
	t.Helper()
	for _, r := range journalOf(t, repo, swarmID, name) {
		if !strings.Contains(r.Raw, `msg="image workspace brought to the tip"`) {
			continue
		}
		for _, f := range strings.Fields(r.Raw) {
			if v, ok := strings.CutPrefix(f, "bytes="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					return n
				}
			}
		}
	}
	return -1
}
