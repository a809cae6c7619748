// Package dockertest holds the helpers every test that needs the real Docker
// engine shares: a client that fails (or, with AIMI_SKIP_DOCKER=1, skips)
// when no engine answers, images built from static Go binaries through the
// Engine API (no registry, no docker CLI), unique run labels, and cleanup
// that removes only what carries a given label. It never prunes globally:
// other engineers' tests run on the same engine at the same time.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// LabelKey is the label every resource a test creates carries, with a RunID
// as value, so cleanup can find exactly that test's resources.
const LabelKey = "org.aimi.test-run"

// SkipEnv names the environment variable that turns "no engine" from a test
// failure into a skip. CI has an engine, so the default is to fail.
const SkipEnv = "AIMI_SKIP_DOCKER"

// LongEnv names the environment variable that runs the long proofs (minutes
// each on 2 cores), which `make test` leaves out to stay within its time and
// `make test-long` runs.
const LongEnv = "AIMI_LONG_TESTS"

// Long skips t unless LongEnv is 1.
func Long(t testing.TB) {
	t.Helper()
	if os.Getenv(LongEnv) != "1" {
		t.Skipf("a long proof: run it with %s=1 (make test-long)", LongEnv)
	}
}

// cleanupTimeout bounds cleanup work; it runs after the test's own context
// may already be cancelled.
const cleanupTimeout = 60 * time.Second

// RunID returns a new unique label value (time plus random bits), distinct
// across processes and calls.
func RunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%s", time.Now().UnixNano()%1e9, hex.EncodeToString(b[:]))
}

// NewClient returns an API client configured from the environment with API
// version negotiation (engine 20.10 speaks API 1.41, older than the library).
func NewClient() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("create docker client: %w", err)
	}
	return cli, nil
}

// Client returns a client that answered a ping, closed at the end of the
// test. No engine fails the test, unless AIMI_SKIP_DOCKER=1 skips it.
func Client(t testing.TB) *client.Client {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("%s=1: skipping test that needs the Docker engine", SkipEnv)
	}
	cli, err := NewClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		t.Fatalf("no Docker engine answers (%v); start one or set %s=1 to skip", err, SkipEnv)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// CleanupByLabel force-removes every container, then every network, that
// carries the label key=value. Images are removed by BuildGoImage's own
// cleanup. Not-found errors (something else removed it first) are ignored.
//
// A network the engine keeps for an endpoint no container holds (see
// LeakedNetworkError) is not an error here: nothing a client does removes
// it. Cleanup logs such networks.
func CleanupByLabel(ctx context.Context, key, value string) error {
	_, err := splitLeaks(cleanupWithLeaks(ctx, key, value))
	return err
}

func cleanupWithLeaks(ctx context.Context, key, value string) error {
	cli, err := NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	return cleanupByLabel(ctx, cli, key, value)
}

func cleanupByLabel(ctx context.Context, cli *client.Client, key, value string) error {
	f := filters.NewArgs(filters.Arg("label", key+"="+value))
	var errs []error
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("list containers labelled %s=%s: %w", key, value, err)
	}
	var names []string
	for _, c := range cs {
		for _, n := range c.Names {
			names = append(names, strings.TrimPrefix(n, "/"))
		}
		err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) && !isRemovalInProgress(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	// A daemon's workspace images, once no container of them is left, and
	// only by the daemon's own label: an engine commit copies its
	// container's labels onto the image, so a test's sandbox image carries
	// the test run's label and so does every workspace image made over it,
	// including those of other tests' daemons still running.
	var ims []image.Summary
	if key == contract.LabelDaemon {
		wf := filters.NewArgs(filters.Arg("label", key+"="+value), filters.Arg("label", contract.LabelWorkspace+"=true"))
		if ims, err = cli.ImageList(ctx, image.ListOptions{All: true, Filters: wf}); err != nil {
			errs = append(errs, fmt.Errorf("list images labelled %s=%s: %w", key, value, err))
		}
	}
	for _, im := range ims {
		for _, ref := range append(im.RepoTags, im.ID) {
			if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove image %s: %w", ref, err))
			}
		}
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list networks labelled %s=%s: %w", key, value, err))...)
	}
	for _, n := range ns {
		if err := removeNetwork(ctx, cli, n.ID, names); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// LeakedNetworkError reports a network the engine refuses to remove ("has
// active endpoints") although no container, in any state, is attached to it
// and its endpoint list is empty. Engine 20.10 loses count of a network's
// endpoints now and then when containers on it are removed under load, and
// keeps such a network until the engine restarts (moby/moby#43286). Nothing
// a client does removes it, so test cleanups report it instead of failing.
type LeakedNetworkError struct{ Name, ID string }

func (e *LeakedNetworkError) Error() string {
	return fmt.Sprintf("network %s (%.12s) kept by the engine: it counts an endpoint no container holds (moby/moby#43286; gone after the engine restarts)", e.Name, e.ID)
}

// Leaked reports whether the network id is in the state LeakedNetworkError
// describes: nothing attached, listed or not.
func Leaked(ctx context.Context, cli *client.Client, id string) bool {
	n, err := cli.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil || len(n.Containers) > 0 {
		return false
	}
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Limit: 1, Filters: filters.NewArgs(filters.Arg("network", id))})
	return err == nil && len(cs) == 0
}

// removeNetwork retries while the network still has endpoints: a container
// whose removal another goroutine has in progress (skipped above) keeps its
// endpoint for a moment after ContainerRemove returns. A network the engine
// keeps for an endpoint nobody holds ends in a LeakedNetworkError.
func removeNetwork(ctx context.Context, cli *client.Client, id string, removed []string) error {
	for attempt := 0; ; attempt++ {
		err := cli.NetworkRemove(ctx, id)
		if err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if !strings.Contains(err.Error(), "active endpoints") {
			return err
		}
		if attempt == 25 {
			if Leaked(ctx, cli, id) {
				n, _ := cli.NetworkInspect(ctx, id, network.InspectOptions{})
				return &LeakedNetworkError{Name: n.Name, ID: id}
			}
			return err
		}
		// Engine 20.10 can also keep the endpoint of a container after
		// the container is gone (one removed twice at once). Every
		// container of the run is removed by now, so each endpoint left
		// is disconnected by force, which deletes a stale one by its
		// name; the endpoint list can miss one, so the names of the
		// containers removed above are disconnected too.
		if n, ierr := cli.NetworkInspect(ctx, id, network.InspectOptions{}); ierr == nil {
			for _, ep := range n.Containers {
				_ = cli.NetworkDisconnect(ctx, id, ep.Name, true)
			}
		}
		for _, name := range removed {
			_ = cli.NetworkDisconnect(ctx, id, name, true)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// splitLeaks separates the LeakedNetworkErrors out of a (joined) cleanup
// error.
func splitLeaks(err error) (leaks []*LeakedNetworkError, rest error) {
	if err == nil {
		return nil, nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var others []error
	for _, e := range errs {
		var l *LeakedNetworkError
		if errors.As(e, &l) {
			leaks = append(leaks, l)
		} else {
			others = append(others, e)
		}
	}
	return leaks, errors.Join(others...)
}

func isRemovalInProgress(err error) bool {
	return errdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// Cleanup registers t.Cleanup removing every container and network labelled
// key=value; failures are reported as test errors.
func Cleanup(t testing.TB, key, value string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		leaks, err := splitLeaks(cleanupWithLeaks(ctx, key, value))
		for _, l := range leaks {
			t.Logf("cleanup of resources labelled %s=%s: %v", key, value, l)
		}
		if err != nil {
			t.Errorf("cleanup of resources labelled %s=%s: %v", key, value, err)
		}
	})
}

// BuildGoImage compiles each Go package of pkgs (path in the image -> import
// path or directory, resolved from the test's working directory) as a static
// linux binary (CGO_ENABLED=0), adds the extra files (path in the image ->
// content), and builds a FROM scratch image through the Engine API tagged
// aimi-test/<test name>:<run id> and labelled with labels plus
// LabelKey=<run id>. The image's CMD is the first binary path in sorted
// order. t.Cleanup removes the image (after the test's own later-registered
// cleanups, which must remove the containers using it). Returns the tag.
func BuildGoImage(t testing.TB, ctx context.Context, pkgs map[string]string, files map[string][]byte, labels map[string]string) string {
	t.Helper()
	cli := Client(t)
	tag, remove, err := BuildGoImageE(ctx, cli, t.Name(), t.TempDir(), pkgs, files, labels)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := remove(cctx); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// BuildGoImageE is BuildGoImage for callers without a testing.TB (TestMain):
// name becomes part of the tag, dir holds the build output. remove deletes the
// image (not-found is not an error) and is valid even when err is not nil,
// since a failed build may still have tagged the image.
func BuildGoImageE(ctx context.Context, cli *client.Client, name, dir string, pkgs map[string]string, files map[string][]byte, labels map[string]string) (tag string, remove func(context.Context) error, err error) {
	runID := RunID()
	tag = "aimi-test/" + imageName(name) + ":" + runID
	remove = func(ctx context.Context) error {
		_, err := cli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove test image %s: %w", tag, err)
		}
		return nil
	}
	if len(pkgs) == 0 {
		return tag, remove, errors.New("build test image: no packages to build")
	}
	targets := make([]string, 0, len(pkgs))
	for target := range pkgs {
		if !path.IsAbs(target) || path.Clean(target) != target {
			return tag, remove, fmt.Errorf("build test image: image path %q must be absolute and clean", target)
		}
		targets = append(targets, target)
	}
	sort.Strings(targets)

	var df strings.Builder
	df.WriteString("FROM scratch\n")
	ctxFiles := map[string][]byte{}
	for i, target := range targets {
		bin := fmt.Sprintf("bin%d", i)
		out := filepath.Join(dir, bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkgs[target])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			return tag, remove, fmt.Errorf("build test image: go build %s: %w\n%s", pkgs[target], err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return tag, remove, fmt.Errorf("build test image: %w", err)
		}
		ctxFiles[bin] = b
		fmt.Fprintf(&df, "COPY %s %s\n", bin, target)
	}
	extra := make([]string, 0, len(files))
	for p := range files {
		extra = append(extra, p)
	}
	sort.Strings(extra)
	for i, p := range extra {
		if !path.IsAbs(p) || path.Clean(p) != p {
			return tag, remove, fmt.Errorf("build test image: file path %q must be absolute and clean", p)
		}
		f := fmt.Sprintf("file%d", i)
		ctxFiles[f] = files[p]
		fmt.Fprintf(&df, "COPY %s %s\n", f, p)
	}
	cmdJSON, _ := json.Marshal([]string{targets[0]})
	fmt.Fprintf(&df, "CMD %s\n", cmdJSON)
	ctxFiles["Dockerfile"] = []byte(df.String())

	tarball, err := tarOf(ctxFiles)
	if err != nil {
		return tag, remove, err
	}
	all := map[string]string{LabelKey: runID}
	for k, v := range labels {
		all[k] = v
	}
	return tag, remove, buildImage(ctx, cli, tarball, tag, all)
}

// buildImage runs the classic builder (BuildKit needs a session the plain
// API call cannot give) and turns an error in the JSON progress stream, which
// arrives with HTTP 200, into a Go error.
func buildImage(ctx context.Context, cli *client.Client, tarball []byte, tag string, labels map[string]string) error {
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(tarball), build.ImageBuildOptions{
		Tags:        []string{tag},
		Labels:      labels,
		Remove:      true,
		ForceRemove: true,
		// No layer cache: test packages run in parallel and build the same
		// binaries; a build reusing another package's cached layer fails
		// with "failed to get digest" when that package removes its image
		// (PruneChildren) at the same moment.
		NoCache: true,
		Version: build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var log strings.Builder
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("build image %s: read progress: %w", tag, err)
		}
		log.WriteString(m.Stream)
		if m.Error != "" {
			return fmt.Errorf("build image %s: %s\n%s", tag, m.Error, log.String())
		}
	}
}

func tarOf(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", n, err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, fmt.Errorf("tar %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	return buf.Bytes(), nil
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// imageName turns a test name into a valid repository path component.
func imageName(testName string) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(n) > 60 {
		n = strings.Trim(n[:60], "-")
	}
	if n == "" {
		n = "image"
	}
	return n
}
