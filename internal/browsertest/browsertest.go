package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// Packages are the Debian packages of the browser image: Chromium (its
// dependency closure comes along) and one font family so that text renders
// in screenshots. Changing the list changes the image's cache key.
var Packages = []string{"chromium", "fonts-dejavu-core", "fontconfig"}

// chromiumBinary is the browser itself; /usr/bin/chromium is a wrapper
// script that reads /etc/chromium.d and needs bash.
const chromiumBinary = "/usr/lib/chromium/chromium"

// startTimeout bounds the wait for Chromium's DevTools endpoint, and then
// for the connection to it: minutes on a loaded machine.
const startTimeout = 3 * time.Minute

var devtoolsRe = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// Browser is a running headless Chromium.
type Browser struct {
	// WebSocketURL is the browser's DevTools endpoint on 127.0.0.1.
	WebSocketURL string
	// Container is the engine's id of the browser's container.
	Container string
}

// Start builds (or reuses) the browser image, runs Chromium in a labelled
// container on the host network and returns a context connected to it:
// each chromedp.NewContext of it opens a tab. Everything is removed when the
// test ends.
func Start(t testing.TB) (context.Context, *Browser) {
	t.Helper()
	cli := dockertest.Client(t)
	ref := image(t, cli)
	run := dockertest.RunID()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dockertest.CleanupByLabel(ctx, dockertest.LabelKey, run); err != nil {
			t.Errorf("remove browser container: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	b, err := startChromium(ctx, cli, ref, map[string]string{dockertest.LabelKey: run})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := remote.NewAllocator(context.Background(), b.WebSocketURL, remote.NoModifyURL)
	t.Cleanup(acancel)
	return connect(t, actx), b
}

// connect connects to the browser now, under startTimeout, and returns the
// connected context: each chromedp.NewContext of it opens a tab in that
// browser. So a test's own deadline covers its page, not a browser that a
// loaded machine connects to slowly. The first Run of a chromedp context
// ties the browser's lifetime to its ctx, so it runs without a deadline
// and the wait for it has one.
func connect(t testing.TB, actx context.Context) context.Context {
	t.Helper()
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(bctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("connect to the browser: %v", err)
		}
	case <-time.After(startTimeout):
		bcancel()
		t.Fatalf("no connection to the browser within %s", startTimeout)
	}
	return bctx
}

// imageTag names the browser image. It is a cache kept across test runs
// (like the sandbox's base images): a rebuild happens only when its content
// key changes, that is when Packages or the sandbox image recipe change.
const imageTag = "aimi-browser:test"

// placeholderRunner stands where the sandbox image has acp-runner: the
// browser image never runs it, and a fixed file keeps the content key (and so
// the cache) independent of acp-runner's code.
const placeholderRunner = "#!/bin/sh\necho 'aimi browser test image: no acp-runner here' >&2\nexit 2\n"

// buildTimeout bounds a cold build: about 240 packages downloaded, merged
// and imported took 2.5 minutes here.
const buildTimeout = 10 * time.Minute

func image(t testing.TB, cli client.APIClient) string {
	t.Helper()
	dir := t.TempDir()
	runner := filepath.Join(dir, "placeholder")
	if err := os.WriteFile(runner, []byte(placeholderRunner), 0o755); err != nil {
		t.Fatal(err)
	}
	cache, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	r, err := sandboximage.BuildDetailed(ctx, sandboximage.Options{
		Tag: imageTag, Packages: Packages, RunnerBinary: runner, Client: cli, CacheDir: cache,
		Labels: map[string]string{labelBrowserImage: "true"},
	})
	if err != nil {
		t.Fatalf("build the browser image from Debian's packages: %v", err)
	}
	t.Logf("browser image %s: cached=%t base-cached=%t key=%.12s took=%s", r.Ref, r.ImageCached, r.BaseCached, r.Key, r.Took.Round(time.Millisecond))
	return r.Ref
}

// cacheDir is the browser image's own build cache, next to the sandbox
// image's: a cold browser build holds its cache's lock for minutes, and the
// sandbox image's users (their builds, and sandboxtest's tag removal, which
// waits at most a minute) must not queue behind it.
func cacheDir() (string, error) {
	d, err := sandboximage.DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(d), "browser"), nil
}

// labelBrowserImage marks the browser image, so that it can be found and
// removed (docker image ls --filter label=org.aimi.browser-test-image).
const labelBrowserImage = "org.aimi.browser-test-image"

// browserCPUShares is the browser container's CPU weight: the most the
// engine allows. The browser stands for a person's browser, a program
// outside the engine, but its container is one more peer of the sandboxes
// in the engine's CPU group, where each container weighs the same: with a
// few hundred sandboxes busy (all of them stopping at once) it got one
// share in a few hundred, and the page did not read its stream for
// seconds while the board had long sent every change.
const browserCPUShares = 262144

func startChromium(ctx context.Context, cli client.APIClient, ref string, labels map[string]string) (*Browser, error) {
	cfg := &container.Config{
		Image:      ref,
		Entrypoint: []string{chromiumBinary},
		Cmd: []string{
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--no-first-run", "--no-default-browser-check", "--disable-extensions",
			"--disable-background-networking", "--disable-sync", "--mute-audio",
			"--user-data-dir=/tmp/profile", "--remote-debugging-address=127.0.0.1",
			// 0: Chromium picks a free port and prints it; parallel tests
			// on the host network never collide.
			"--remote-debugging-port=0", "about:blank",
		},
		Env:    []string{"HOME=/tmp"},
		Labels: labels,
	}
	host := &container.HostConfig{NetworkMode: "host", ShmSize: 256 << 20, Resources: container.Resources{CPUShares: browserCPUShares}}
	created, err := cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if err != nil {
		return nil, fmt.Errorf("create the browser container from %s: %w", ref, err)
	}
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start the browser container: %w", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStderr: true, ShowStdout: true, Follow: true})
	if err != nil {
		return nil, fmt.Errorf("read the browser's output: %w", err)
	}
	defer logs.Close()
	// The multiplexed stream's 8-byte frame headers do not matter here:
	// the line is found by a pattern.
	sc := bufio.NewScanner(logs)
	var seen []string
	for sc.Scan() {
		line := sc.Text()
		if m := devtoolsRe.FindStringSubmatch(line); m != nil {
			return &Browser{WebSocketURL: m[1], Container: created.ID}, nil
		}
		if len(seen) < 40 {
			seen = append(seen, line)
		}
	}
	return nil, fmt.Errorf("chromium did not announce its DevTools endpoint (%v); its output:\n%s", sc.Err(), strings.Join(seen, "\n"))
}
