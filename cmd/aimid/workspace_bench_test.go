package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// BenchmarkWorkspaceStart measures starts whose sandboxes come from the
// repository's workspace image (docs/workspaces.md), on the demo's
// repository (task files only) and on a generated project
// (gittest.RealProject: 1,000 files in 80 directories, 200 commits): a
// start of 8 one-story task files until every container's first
// in_progress, with the warm pool of 8 full of the image's sandboxes
// (warm) and on a daemon without a pool (cold, created from the image),
// each next to 8 raw create+start of the sandbox image in the same round.
// Every round commits its task files first, as a user does, so the tip
// has moved past the image's commit and each runner fetches that commit
// (tip=moved); tip=same starts task files the image holds already. Also
// the most any sandbox wrote to its writable layer (its story's work
// included: an upper bound of what it wrote before its first story).
// Medians over b.N rounds. AIMI_BENCH_WORKSPACE_FILES sets the generated
// project's files (1,000; 10 a directory) and AIMI_BENCH_WORKSPACE_N the
// containers of a start (8).
//
//	go test -run '^$' -bench WorkspaceStart -benchtime 3x -timeout 40m ./cmd/aimid
func BenchmarkWorkspaceStart(b *testing.B) {
	image := sandboxtest.Image(b)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	for _, repoKind := range []string{"demo", "project"} {
		for _, tip := range []string{"moved", "same"} {
			b.Run("repo="+repoKind+"/tip="+tip, func(b *testing.B) { workspaceStart(b, cli, image, repoKind == "project", tip == "same") })
		}
	}
}

// wsDaemon is one daemon of the benchmark on its own repository; waits:
// the measured starts' stories wait as a real agent waits for its model
// (AIMI_BENCH_WORKSPACE_AGENT=waits).
type wsDaemon struct {
	sock, repo, instance string
	p                    *proc
	waits                bool
}

// benchTaskFiles commits task files names to repo, their story marked
// [demo:slow] when waits: a demo story otherwise ends within the start's
// second, and its commit, push and exit then take the cores from the
// containers still starting, which a real agent's story (minutes of
// waiting for its model) does not.
func benchTaskFiles(b *testing.B, repo string, waits bool, names ...string) {
	b.Helper()
	if !waits {
		addTaskFiles(b, repo, names...)
		return
	}
	for _, n := range names {
		data := bytes.Replace(taskFileJSON("feat/"+n, 1), []byte(`"description": "`), []byte(`"description": "`+demoagent.MarkerSlow+` `), 1)
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", n+"-tasks.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gittest.Git(b, repo, "add", "-A")
	gittest.Git(b, repo, "commit", "-q", "-m", "more task files")
}

func workspaceStart(b *testing.B, cli *client.Client, image string, project, same bool) {
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	n, proj := timeToWorkContainers, gittest.RealProject
	if v, err := strconv.Atoi(os.Getenv("AIMI_BENCH_WORKSPACE_N")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("AIMI_BENCH_WORKSPACE_FILES")); err == nil && v > 0 {
		proj.Files, proj.Dirs = v, max(v/12, 1)
	}
	rounds, waits := b.N, os.Getenv("AIMI_BENCH_WORKSPACE_AGENT") == "waits"
	names := func(d string, r int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d-%02d-%s", d, r, i, run[:4])
		}
		return out
	}
	open := func(d string, pool int) *wsDaemon {
		repo := historyRepo(b, 0, 0, names(d, 0)...)
		if project {
			gittest.AddProject(b, repo, "main", proj)
		}
		if same {
			var all []string
			for r := 1; r <= rounds; r++ {
				all = append(all, names(d, r)...)
			}
			benchTaskFiles(b, repo, waits, all...)
		}
		dir := shortDir(b)
		sock := filepath.Join(dir, "aimid.sock")
		w := &wsDaemon{sock: sock, repo: repo, instance: testInstance(sock), waits: waits}
		dockertest.Cleanup(b, contract.LabelDaemon, w.instance)
		w.p = launch(b, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"),
			Config: "agent:\n  kind: demo\ngit:\n  mode: local\n",
			Env: []string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
				"AIMI_SWARM_STOP_GRACE=1s", "AIMI_SANDBOX_WARM_POOL=" + strconv.Itoa(pool)}})
		return w
	}
	warm, cold := open("w", n), open("c", 0)
	defer warm.p.stop(b)
	defer cold.p.stop(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The first start of each repository builds its image.
	warm.start(b, ctx, names("w", 0), false)
	cold.start(b, ctx, names("c", 0), false)
	var raw, warmAll, coldAll []time.Duration
	var written int64
	for r := 1; r <= rounds; r++ {
		if !same {
			benchTaskFiles(b, warm.repo, waits, names("w", r)...)
			benchTaskFiles(b, cold.repo, waits, names("c", r)...)
		}
		// The image built after the first start stays (a round's task
		// files move the tip far less than workspace.RebuildPaths): each
		// round starts once it and the pool's sandboxes are there.
		img := waitBuilt(b, warm, 1)
		waitBuilt(b, cold, 1)
		waitPoolOf(b, ctx, cli, warm, img, n)
		raw = append(raw, rawFanOutDocker(b, cli, image, run, n, r))
		a, wr := cold.start(b, ctx, names("c", r), true)
		coldAll, written = append(coldAll, a), max(written, wr)
		a, wr = warm.start(b, ctx, names("w", r), true)
		warmAll, written = append(warmAll, a), max(written, wr)
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(med(raw).Seconds(), "s-raw")
	b.ReportMetric(med(warmAll).Seconds(), "s-warm-all-work")
	b.ReportMetric(med(coldAll).Seconds(), "s-cold-all-work")
	b.ReportMetric(float64(med(warmAll))/float64(med(raw)), "warm-ratio")
	b.ReportMetric(float64(med(coldAll))/float64(med(raw)), "cold-ratio")
	b.ReportMetric(float64(written)/(1<<20), "MB-written-per-sandbox")
	b.Logf("raw %v, warm %v, cold %v", raw, warmAll, coldAll)
}

// start starts files on w and returns when the last container first
// worked, counted from the start, and the most a container wrote to its
// writable layer; every container must run on a workspace image.
func (w *wsDaemon) start(b *testing.B, ctx context.Context, files []string, fromImage bool) (all time.Duration, written int64) {
	b.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, ".aimi/tasks/"+f+"-tasks.json")
	}
	begin := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--force", "--local", "--max", strconv.Itoa(len(files)),
		"--files", strings.Join(paths, ","), "--repo", w.repo, "--socket", w.sock); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	if w.waits && fromImage {
		testwait.Eventually(b, 5*time.Minute, "every container working", func() error {
			if k := len(firstWork(b, w.repo, validState(b, w.repo))); k < len(files) {
				return fmt.Errorf("%d of %d working; daemon log:\n%s", k, len(files), w.p.logs())
			}
			return nil
		}, testwait.Every(100*time.Millisecond))
	} else {
		waitStatus(b, ctx, w.repo, w.sock, "done", terminalIn, len(files))
	}
	sw := validState(b, w.repo)
	at := firstWork(b, w.repo, sw)
	if len(at) != len(files) {
		b.Fatalf("%d of %d containers wrote an in_progress update; daemon log:\n%s", len(at), len(files), w.p.logs())
	}
	for _, t := range at {
		all = max(all, t.Sub(begin))
	}
	b.Logf("start at %s", begin.UTC().Format(time.RFC3339Nano))
	logPhases(b, phaseTimes(b, w.repo, sw, begin))
	cli := dockertest.Client(b)
	for _, c := range sw.Containers {
		in, err := cli.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			b.Fatal(err)
		}
		written = max(written, layerBytes(b, ctx, cli, in))
		if fromImage && !contract.IsWorkspaceImage(in.Config.Image) {
			b.Errorf("%s ran on %s, not a workspace image", c.ContainerName, in.Config.Image)
		}
	}
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", w.repo, "--socket", w.sock)
	// Stopped mid-story (waits), a container pushes its branch on its way
	// out: the next start is measured once none of them runs.
	testwait.Eventually(b, 5*time.Minute, "the start's containers stopped", func() error {
		for _, c := range sw.Containers {
			if in, err := cli.ContainerInspect(ctx, c.ContainerID); !errdefs.IsNotFound(err) && (err != nil || in.State.Running) {
				return fmt.Errorf("%s still runs (%v)", c.ContainerName, err)
			}
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	aimi(ctx, "swarm", "cleanup", "--force", "--repo", w.repo, "--socket", w.sock)
	return all, written
}

// waitBuilt waits until w's daemon built k workspace images and returns
// the last one.
func waitBuilt(b *testing.B, w *wsDaemon, k int) string {
	b.Helper()
	var built []string
	testwait.Eventually(b, 5*time.Minute, fmt.Sprintf("%d workspace images built", k), func() error {
		built = built[:0]
		for _, line := range strings.Split(w.p.logs(), "\n") {
			if strings.Contains(line, `msg="workspace image built"`) {
				for _, f := range strings.Fields(line) {
					if v, ok := strings.CutPrefix(f, "image="); ok {
						built = append(built, v)
					}
				}
			}
		}
		if len(built) < k {
			return fmt.Errorf("%d built; daemon log:\n%s", len(built), w.p.logs())
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	return built[len(built)-1]
}

// waitPoolOf waits until n pool sandboxes of image wait on w's daemon.
func waitPoolOf(b *testing.B, ctx context.Context, cli *client.Client, w *wsDaemon, image string, n int) {
	b.Helper()
	testwait.Eventually(b, 5*time.Minute, fmt.Sprintf("%d pool sandboxes of %s", n, image), func() error {
		k := 0
		for _, in := range waitingIn(warmSandboxes(b, ctx, cli, w.instance)) {
			if in.Config.Image == image {
				k++
			}
		}
		if k < n {
			return fmt.Errorf("%d waiting; daemon log:\n%s", k, w.p.logs())
		}
		return nil
	}, testwait.Every(500*time.Millisecond))
}

// layerBytes is what a container wrote to its writable layer: its upper
// directory's files, read at once. The engine's own figure (SizeRw) on a
// storage driver without a native diff (fuse-overlayfs) walks the image's
// tree too: seconds a container on a 10,000-file tree, so that at 32 the
// last ones were measured after their first story had ended and
// committed. Without a readable upper directory, the engine's figure.
func layerBytes(b *testing.B, ctx context.Context, cli *client.Client, in container.InspectResponse) int64 {
	b.Helper()
	if in.GraphDriver.Data != nil {
		if upper := in.GraphDriver.Data["UpperDir"]; upper != "" {
			var n int64
			err := filepath.WalkDir(upper, func(_ string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.Type().IsRegular() {
					fi, err := d.Info()
					if err != nil {
						return err
					}
					n += fi.Size()
				}
				return nil
			})
			if err == nil {
				return n
			}
		}
	}
	sized, _, err := cli.ContainerInspectWithRaw(ctx, in.ID, true)
	if err != nil {
		b.Fatal(err)
	}
	if sized.SizeRw == nil {
		return 0
	}
	return *sized.SizeRw
}
