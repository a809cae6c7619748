package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/workspace"
)

// TestWorkspaceImageOnAGeneratedProject: a swarm on a generated project
// (1,000 files in 80 directories, 200 commits) makes the daemon build the
// repository's workspace image once its containers work; the pool then
// keeps sandboxes of that image, and the next start's sandboxes (claimed
// and created alike) start from it: at a tip past the image's commit the
// runner applies the difference the git service made once for all
// ("from=image+delta", no git process) and, the commit being past the
// rebuild threshold (workspace.RebuildPaths), the image is rebuilt at the
// tip; at the image's own tip the runner only names its branch
// ("from=image"); a branch that exists and forked before the image's
// commit is fetched ("from=image+fetch"). Each sandbox
// writes little (its
// story included): its workspace is the image's, copy-on-write.
func TestWorkspaceImageOnAGeneratedProject(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name()+dockertest.RunID())))[:6]
	round := func(r string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%c-%s", r, 'a'+i, sfx))
		}
		return out
	}
	repo := projectRepo(t, round("wi1", 2)...)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true,
		Config: "agent:\n  kind: demo\ngit:\n  mode: local\n", Env: []string{"AIMI_SANDBOX_WARM_POOL=2"}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	start := func(files []string) *state.Swarm {
		t.Helper()
		var paths []string
		for _, f := range files {
			paths = append(paths, ".aimi/tasks/"+f+"-tasks.json")
		}
		if code, out, errOut := aimi(ctx, "swarm", "start", "--force", "--follow", "--local", "--max", "4",
			"--files", strings.Join(paths, ","), "--repo", repo, "--socket", sock); code != 0 {
			t.Fatalf("start %v: exit %d\n%s\n%s\ndaemon log:\n%s", files, code, out, errOut, p.logs())
		}
		return validState(t, repo)
	}

	start(round("wi1", 2))
	wsImage := waitWorkspacePool(t, ctx, cli, instance, 2, p)

	// The next start's task files are a commit the image does not hold,
	// after one that moves the tip far (a few task files alone keep the
	// image: TestWorkspaceImageKeptWhileTheTipMovesLittle); the one after
	// it finds its tip in the image rebuilt meanwhile.
	next, last := round("wi2", 3), round("wi3", 2)
	addBulk(t, repo, workspace.RebuildPaths+1)
	addTaskFiles(t, repo, append(append([]string(nil), next...), last...)...)
	sw := start(next)
	checkFrom(t, ctx, cli, repo, sw, "image+delta", p)
	if got := waitWorkspacePool(t, ctx, cli, instance, 2, p); got == wsImage {
		t.Errorf("the workspace image was not rebuilt at the new tip (%s)", got)
	}
	sw = start(last)
	checkFrom(t, ctx, cli, repo, sw, "image", p)
	// A task file again: its branch exists, forked before the image's
	// commit, so the runner fetches the branch's tip into the image's
	// workspace.
	sw = start(round("wi1", 1))
	checkFrom(t, ctx, cli, repo, sw, "image+fetch", p)
	if !strings.Contains(p.logs(), "workspace image built") {
		t.Errorf("the daemon's log does not say it built a workspace image:\n%s", p.logs())
	}
}

// projectRepo is historyRepo's checkout of task files names with the
// generated project (gittest.RealProject) on top.
func projectRepo(t testing.TB, names ...string) string {
	t.Helper()
	repo := historyRepo(t, 0, 0, names...)
	gittest.AddProject(t, repo, "main", gittest.RealProject)
	return repo
}

// addTaskFiles commits one-story task files names on main.
func addTaskFiles(t testing.TB, repo string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), taskFileJSON("feat/"+n, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "more task files")
}

// waitWorkspacePool waits until n pool sandboxes of a workspace image
// wait, and returns that image.
func waitWorkspacePool(t testing.TB, ctx context.Context, cli *client.Client, instance string, n int, p *proc) string {
	t.Helper()
	img := ""
	testwait.Eventually(t, 5*time.Minute, fmt.Sprintf("%d pool sandboxes of a workspace image", n), func() error {
		k := 0
		for _, in := range waitingIn(warmSandboxes(t, ctx, cli, instance)) {
			if contract.IsWorkspaceImage(in.Config.Image) {
				k, img = k+1, in.Config.Image
			}
		}
		if k != n {
			return fmt.Errorf("%d waiting; daemon log:\n%s", k, p.logs())
		}
		return nil
	}, testwait.Every(500*time.Millisecond))
	return img
}

// checkFrom: every container of sw runs on a workspace image, its
// runner's "workspace ready" says from=want, and it wrote less than 1 MB
// to its writable layer (its story included).
func checkFrom(t testing.TB, ctx context.Context, cli *client.Client, repo string, sw *state.Swarm, want string, p *proc) {
	t.Helper()
	for _, c := range sw.Containers {
		from := strings.TrimPrefix(workspaceFrom(t, repo, sw.SwarmID, c.ContainerName), "from=")
		if from != want {
			var lines []string
			for _, r := range journalOf(t, repo, sw.SwarmID, c.ContainerName) {
				lines = append(lines, r.Raw)
			}
			t.Errorf("%s: workspace from %q, want %q; its journal:\n%s", c.ContainerName, from, want, strings.Join(lines, "\n"))
		}
		in, _, err := cli.ContainerInspectWithRaw(ctx, c.ContainerID, true)
		if err != nil {
			t.Fatal(err)
		}
		if !contract.IsWorkspaceImage(in.Config.Image) {
			t.Errorf("%s runs on %s, not a workspace image", c.ContainerName, in.Config.Image)
		}
		// git freshens (sets the time of) a split index's shared part on
		// every read and a pack whenever it finds an object there: of
		// the sandbox's own user, each would be copied into its layer.
		changes, err := cli.ContainerDiff(ctx, c.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range changes {
			base := path.Base(ch.Path)
			if ch.Kind == container.ChangeModify && (strings.HasPrefix(base, "sharedindex.") || strings.HasSuffix(base, ".pack")) {
				t.Errorf("%s: the image's %s was copied into its writable layer", c.ContainerName, ch.Path)
			}
		}
		if in.SizeRw == nil || *in.SizeRw > 1<<20 {
			t.Errorf("%s wrote %v bytes to its writable layer, want at most 1 MB", c.ContainerName, in.SizeRw)
		}
		t.Logf("%s: from=%s, image %s, wrote %d bytes, claimed %t", c.ContainerName, from, in.Config.Image, *in.SizeRw,
			hasWarmNote(t, repo, sw.SwarmID, c.ContainerName))
	}
}
