package workspace_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/workspace"
)

// project is a shallow clone of a generated project, checked out, as a
// tar (what the git service's ready-made workspace holds), and its tip.
func project(t *testing.T) (tarball []byte, tip string) {
	t.Helper()
	src := t.TempDir()
	gittest.Git(t, src, "init", "-q", "-b", "main")
	gittest.Git(t, src, "commit", "-q", "--allow-empty", "-m", "root")
	gittest.AddProject(t, src, "main", gittest.RealProject)
	work := filepath.Join(t.TempDir(), "w")
	gittest.Git(t, "", "clone", "-q", "--depth", "1", "--no-tags", "file://"+src, work)
	tip = strings.TrimSpace(gittest.Git(t, work, "rev-parse", "HEAD"))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == work {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(work, p)
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return buf.Bytes(), tip
}

// sh runs a shell command in container id as its user; its output.
func sh(t *testing.T, cli *client.Client, id, cmd string) string {
	t.Helper()
	ctx := context.Background()
	ex, err := cli.ContainerExecCreate(ctx, id, dcontainer.ExecOptions{Cmd: []string{"sh", "-c", cmd}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, dcontainer.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	var out bytes.Buffer
	io.Copy(&out, att.Reader)
	// The multiplexed stream's frame headers are 8 bytes; keep text only.
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' {
			return -1
		}
		return r
	}, out.String())
}

// onEngine is a test's sandbox image, engine client, Docker engine and
// run id (everything labelled with it goes at its end).
func onEngine(t *testing.T) (base string, cli *client.Client, d *container.Docker, run string) {
	t.Helper()
	if testing.Short() {
		t.Skip("real engine")
	}
	base = sandboxtest.Image(t)
	cli = dockertest.Client(t)
	run = dockertest.RunID()
	// Cleanups run last first: the workspace images, which go by their
	// daemon's label only, after every container of the run.
	dockertest.Cleanup(t, contract.LabelDaemon, "cow-"+run)
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	d, err := container.NewDocker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return base, cli, d, run
}

// TestSandboxesOfAWorkspaceImageShareNothingTheyWrite: two sandboxes of
// one workspace image each see the repository checked out; what one
// writes (a new file, a changed tracked file, a deleted one) neither the
// other nor a later sandbox of the image sees, it lands in the writer's
// own writable layer (what sandbox.disk limits: the engine's SizeRw
// counts it), and a sandbox that writes nothing has next to nothing
// there. The image cannot be removed while a sandbox of it exists.
func TestSandboxesOfAWorkspaceImageShareNothingTheyWrite(t *testing.T) {
	base, cli, d, run := onEngine(t)
	tarball, tip := project(t)
	labels := map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "cow-" + run}
	m := workspace.New(d, workspace.Options{Labels: labels})
	m.Prepare("/repo/a", base, func(context.Context) (workspace.Tree, error) {
		return workspace.Tree{Commit: tip, Tar: io.NopCloser(bytes.NewReader(tarball))}, nil
	}, nil)
	m.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, commit, ok := m.Image(ctx, "/repo/a", base)
	if !ok || commit != tip {
		t.Fatalf("workspace image after Prepare: %q at %q (ok %t), want one at %s", img, commit, ok, tip)
	}
	in, err := cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(in.Config.Env, " "), contract.EnvWorkspaceBase+"="+tip) {
		t.Errorf("the image's environment does not name its commit: %v", in.Config.Env)
	}
	newBox := func() string {
		c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: img, Entrypoint: []string{"sleep", "600"}, Labels: labels},
			&dcontainer.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.ContainerStart(ctx, c.ID, dcontainer.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	a, b := newBox(), newBox()
	const tracked = "/workspace/src/d000/m0/f0000.txt"
	if out := sh(t, cli, a, "cd /workspace && git status --porcelain && git rev-parse HEAD && id -u && stat -c %u "+tracked); !strings.Contains(out, tip) || !strings.Contains(out, "1000\n1000") {
		t.Fatalf("the sandbox does not see the repository clean at %s, owned by its user:\n%s", tip, out)
	}
	sh(t, cli, a, "head -c 300000 /dev/urandom > /workspace/new.bin && echo changed >> "+tracked+" && rm /workspace/src/d001/m1/f0001.txt")
	for _, id := range []string{b, newBox()} {
		out := sh(t, cli, id, "cd /workspace && git status --porcelain; ls new.bin 2>&1; tail -c 8 "+tracked)
		if strings.Contains(out, " M ") || strings.Contains(out, " D ") || !strings.Contains(out, "No such file") || strings.Contains(out, "changed") {
			t.Errorf("another sandbox of the image sees the first one's writes:\n%s", out)
		}
	}
	sizeRw := func(id string) int64 {
		in, _, err := cli.ContainerInspectWithRaw(ctx, id, true)
		if err != nil || in.SizeRw == nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		return *in.SizeRw
	}
	if got := sizeRw(a); got < 300000 || got > 1<<20 {
		t.Errorf("the writer's writable layer holds %d bytes, want its 300,000 written and little else", got)
	}
	if got := sizeRw(b); got > 256<<10 {
		t.Errorf("a sandbox that only looked holds %d bytes in its writable layer", got)
	}
	if err := d.RemoveImage(ctx, img); !errors.Is(err, engine.ErrImageInUse) {
		t.Errorf("removing the image under its sandboxes: %v, want ErrImageInUse", err)
	}
	if _, _, ok := m.Image(ctx, "/repo/a", base); !ok {
		t.Error("the image went while its sandboxes live")
	}
}

// TestCleanupRemovesWhatAKilledDaemonLeft: a build container (a daemon
// killed mid-build) goes at the next start's Cleanup; so does an image
// whose sandbox image's reference names another image now (a new
// sandbox image), unless a sandbox uses it: then it stays until the
// sandbox is gone. An image on the current sandbox image is adopted.
func TestCleanupRemovesWhatAKilledDaemonLeft(t *testing.T) {
	base, cli, d, run := onEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	labels := map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "cow-" + run}
	tarball, tip := project(t)
	// A second name of the sandbox image, moved away after the builds:
	// what a new aimid with another sandbox image looks like.
	old := "aimi-test-old-sandbox:" + run
	if err := cli.ImageTag(ctx, base, old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), old, dimage.RemoveOptions{}) })
	m := workspace.New(d, workspace.Options{Labels: labels, MaxRepos: 3}) // the killed daemon's
	build := func(repo, on string) string {
		m.Prepare(repo, on, func(context.Context) (workspace.Tree, error) {
			return workspace.Tree{Commit: tip, Tar: io.NopCloser(bytes.NewReader(tarball))}, nil
		}, nil)
		m.Wait()
		img, _, ok := m.Image(ctx, repo, on)
		if !ok {
			t.Fatal("no image")
		}
		return img
	}
	used, unused, kept := build("/repo/used", old), build("/repo/unused", old), build("/repo/kept", base)
	if _, err := cli.ImageRemove(ctx, old, dimage.RemoveOptions{}); err != nil { // only the name: base keeps the image
		t.Fatal(err)
	}
	c, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: used, Labels: labels}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	left, err := cli.ContainerCreate(ctx, &dcontainer.Config{Image: base, Labels: map[string]string{
		dockertest.LabelKey: run, contract.LabelDaemon: "cow-" + run, contract.LabelWorkspace: "true"}}, nil, nil, nil, contract.WorkspaceBuildPrefix+run)
	if err != nil {
		t.Fatal(err)
	}
	var ready []string
	next := workspace.New(d, workspace.Options{Labels: labels, Ready: func(repo, image string) { ready = append(ready, repo+" "+image) }}) // the next daemon
	next.Cleanup(ctx)
	next.Announce()
	exists := func(ref string) bool { id, _ := d.ImageID(ctx, ref); return id != "" }
	if exists(unused) {
		t.Error("an image of a former sandbox image no sandbox uses outlived the next start's cleanup")
	}
	if !exists(used) {
		t.Error("an image a sandbox uses was removed")
	}
	if img, commit, ok := next.Image(ctx, "/repo/kept", base); !ok || img != kept || commit != tip {
		t.Errorf("the image on the current sandbox image was not adopted: %q at %q (%t), want %s", img, commit, ok, kept)
	}
	if want := []string{"/repo/kept " + kept}; !slices.Equal(ready, want) {
		t.Errorf("Ready heard %v, want %v", ready, want)
	}
	if _, _, ok := next.Image(ctx, "/repo/used", base); ok {
		t.Error("an image of a former sandbox image was adopted")
	}
	if _, err := cli.ContainerInspect(ctx, left.ID); err == nil {
		t.Error("a build container outlived the next start's cleanup")
	}
	if err := d.Remove(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, time.Minute, "the image gone once its sandbox is", func() error {
		next.Sweep(ctx)
		if exists(used) {
			return errors.New("still there")
		}
		return nil
	})
	if !exists(kept) {
		t.Error("the adopted image was swept")
	}
}
