package sandboximage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// runnerPackage is the real acp-runner when it builds, else the stub: the
// builder is proven either way, and once the runner compiles the same tests
// prove the real binary runs in the image.
func runnerPackage(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", "/dev/null", "./cmd/acp-runner")
	cmd.Dir = "../.."
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("./cmd/acp-runner does not build yet, using the stub runner: %v %s", err, firstLine(string(out)))
		return "./internal/sandboximage/internal/stubrunner"
	}
	return "./cmd/acp-runner"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// shared is the one run-unique image this package's tests build: its label
// makes its content key (and so its final layer) the run's own, while the
// rootfs tarball and base image stay cached for the next run. TestMain
// removes it at the end.
var shared struct {
	once  sync.Once
	cli   *client.Client
	runID string
	opts  sandboximage.Options
	first sandboximage.Result
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cli != nil && shared.opts.Tag != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := sandboximage.RemoveTag(ctx, shared.cli, "", shared.opts.Tag); err != nil {
			fmt.Fprintln(os.Stderr, "remove test image:", err)
			code = 1
		}
		cancel()
		shared.cli.Close()
	}
	os.Exit(code)
}

// testImage builds (once per test binary) the image under a test tag and
// returns its options and the first build's result.
func testImage(t *testing.T) (*client.Client, string, sandboximage.Options, sandboximage.Result) {
	t.Helper()
	dockertest.Client(t) // the skip/fail policy when no engine answers
	shared.once.Do(func() {
		shared.cli, shared.err = dockertest.NewClient()
		if shared.err != nil {
			return
		}
		shared.runID = dockertest.RunID()
		shared.opts = sandboximage.Options{
			Tag:           "aimi-sandbox:test-" + shared.runID,
			RunnerPackage: runnerPackage(t),
			Labels:        map[string]string{dockertest.LabelKey: shared.runID},
			Client:        shared.cli,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		shared.first, shared.err = sandboximage.BuildDetailed(ctx, shared.opts)
	})
	if shared.err != nil {
		t.Fatalf("first build: %v", shared.err)
	}
	return shared.cli, shared.runID, shared.opts, shared.first
}

func TestSecondBuildReusesTheCache(t *testing.T) {
	cli, runID, opts, first := testImage(t)
	t.Logf("first build: image-cached=%t base-cached=%t rootfs-cached=%t took=%s", first.ImageCached, first.BaseCached, first.RootfsCached, first.Took)
	if first.ImageCached {
		t.Fatal("first build of a run-unique image reported a cached image")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	second, err := sandboximage.BuildDetailed(ctx, opts)
	if err != nil {
		t.Fatalf("second build: %v", err)
	}
	t.Logf("second build: image-cached=%t took=%s", second.ImageCached, second.Took)
	if !second.ImageCached || !second.BaseCached || !second.RootfsCached {
		t.Errorf("second build reused image=%t base=%t rootfs=%t, want all true", second.ImageCached, second.BaseCached, second.RootfsCached)
	}
	if second.ID != first.ID || second.Key != first.Key {
		t.Errorf("second build gave %s (key %s), first %s (key %s)", second.ID, second.Key, first.ID, first.Key)
	}

	// The public entry point says the same.
	ref, cached, err := sandboximage.Build(ctx, opts)
	if err != nil || !cached || ref != opts.Tag {
		t.Errorf("Build = %q, %t, %v; want %q, true, nil", ref, cached, err, opts.Tag)
	}

	insp, err := cli.ImageInspect(ctx, opts.Tag)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{sandboximage.LabelSandboxImage: "true", sandboximage.LabelKey: first.Key, sandboximage.LabelRootfs: first.RootfsKey, dockertest.LabelKey: runID} {
		if got := insp.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
}

func TestImageRunsRunnerAndGitAsTheSandboxUser(t *testing.T) {
	cli, runID, opts, _ := testImage(t)
	dockertest.Cleanup(t, dockertest.LabelKey, runID) // containers go before TestMain removes the image

	tests := []struct {
		name       string
		entrypoint []string
		cmd        []string
		want       []string // substrings of the output
	}{
		{"acp-runner starts and answers --help", nil, []string{"--help"}, []string{"acp-runner"}},
		{"git is installed", []string{"git"}, []string{"--version"}, []string{"git version 2."}},
		{"runs as the unprivileged user in the workspace", []string{"/bin/sh", "-c"}, []string{"id -u; id -un; pwd; echo $HOME; test -w /workspace && echo writable"}, []string{"1000\naimi\n/workspace\n/home/aimi\nwritable"}},
		{"CA bundle is in place", []string{"/bin/sh", "-c"}, []string{"grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt"}, []string{"1", "\n"}},
		{"git commits in a fresh repo without extra setup", []string{"/bin/sh", "-c"}, []string{"cd /tmp && git init -q r && cd r && echo hi > f && git add f && git -c user.name=a -c user.email=a@b commit -qm x && git log --oneline | wc -l && ls / >/dev/null && echo done"}, []string{"1\ndone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, cli, opts.Tag, runID, tc.entrypoint, tc.cmd)
			for _, w := range tc.want {
				if !strings.Contains(strings.ToLower(out), strings.ToLower(w)) {
					t.Errorf("output %q (exit %d) lacks %q", out, code, w)
				}
			}
			if code == 126 || code == 127 {
				t.Errorf("exit %d: the program could not be executed in the image: %s", code, out)
			}
		})
	}
}

// run creates, starts and waits for one container, returning its combined
// output and exit code. No network: nothing here needs it.
func run(t *testing.T, cli client.APIClient, img, runID string, entrypoint, cmd []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := cli.ContainerCreate(ctx,
		&container.Config{Image: img, Entrypoint: entrypoint, Cmd: cmd, Labels: map[string]string{dockertest.LabelKey: runID}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
	case err := <-errC:
		t.Fatalf("wait: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return out.String(), code
}

func TestRebuildUnderTheSameTagRemovesTheReplacedImage(t *testing.T) {
	cli, runID, shared, _ := testImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := shared
	opts.Tag = "aimi-sandbox:test-replace-" + runID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sandboximage.RemoveTag(ctx, cli, "", opts.Tag); err != nil {
			t.Errorf("remove test image: %v", err)
		}
	})
	var ids []string
	for _, variant := range []string{"a", "b"} {
		opts.Labels = map[string]string{dockertest.LabelKey: runID, "org.aimi.test-variant": variant}
		r, err := sandboximage.BuildDetailed(ctx, opts)
		if err != nil {
			t.Fatalf("build variant %s: %v", variant, err)
		}
		ids = append(ids, r.ID)
	}
	if ids[0] == ids[1] {
		t.Fatalf("both variants gave image %s", ids[0])
	}
	if _, err := cli.ImageInspect(ctx, ids[0]); !errdefs.IsNotFound(err) {
		t.Errorf("replaced image %s: inspect err = %v, want not found", ids[0], err)
	}
	if insp, err := cli.ImageInspect(ctx, opts.Tag); err != nil || insp.ID != ids[1] {
		t.Errorf("tag %s names %s (%v), want %s", opts.Tag, insp.ID, err, ids[1])
	}
}

// An image built FROM the sandbox image inherits every label, the content
// key too; the cache must still tag the builder's own image, never a
// derived one (here one whose entrypoint is dockerd).
func TestCacheNeverTagsAnImageDerivedFromTheSandboxImage(t *testing.T) {
	cli, runID, shared, first := testImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base, err := cli.ImageInspect(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The old lookup took the newest image with the key: make the derived
	// one strictly newer (image times have one-second resolution).
	made, _ := time.Parse(time.RFC3339Nano, base.Created)
	for time.Now().Unix() <= made.Unix() {
		time.Sleep(50 * time.Millisecond)
	}
	derivedTag := "aimi-sandbox-derived:test-" + runID
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: first.ID, Labels: map[string]string{dockertest.LabelKey: runID}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	derived, err := cli.ContainerCommit(ctx, created.ID, container.CommitOptions{Reference: derivedTag,
		Changes: []string{`ENTRYPOINT ["dockerd"]`, "USER root"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sandboximage.RemoveTag(context.Background(), cli, "", derivedTag); err != nil {
			t.Errorf("remove derived image: %v", err)
		}
	})
	if di, err := cli.ImageInspect(ctx, derived.ID); err != nil || di.Config.Labels[sandboximage.LabelKey] != first.Key {
		t.Fatalf("derived image does not inherit the key label (%v): %v", err, di.Config.Labels)
	}

	opts := shared
	opts.Tag = "aimi-sandbox:test-derived-" + runID
	t.Cleanup(func() {
		if err := sandboximage.RemoveTag(context.Background(), cli, "", opts.Tag); err != nil {
			t.Errorf("remove test image: %v", err)
		}
	})
	r, err := sandboximage.BuildDetailed(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cli.ImageInspect(ctx, opts.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == derived.ID || r.ID != first.ID || got.ID != first.ID {
		t.Errorf("tag %s names %s (build says %s), want the builder's own %s, not the derived %s", opts.Tag, got.ID, r.ID, first.ID, derived.ID)
	}
	if ep := got.Config.Entrypoint; len(ep) != 1 || ep[0] != sandboximage.RunnerPath {
		t.Errorf("tagged image's entrypoint is %v", ep)
	}
}
