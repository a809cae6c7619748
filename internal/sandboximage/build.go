package sandboximage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/internal/filelock"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// Label keys and names this package puts on images: external contracts,
// kept in one place.
const (
	// LabelSandboxImage marks every final sandbox image ("true").
	LabelSandboxImage = "org.aimi.sandbox-image"
	// LabelKey holds the content key of a final image: a hash of the rootfs
	// key, the acp-runner binary and the image recipe. An image carrying the
	// key being built is reused as it is.
	LabelKey = "org.aimi.sandbox-key"
	// LabelRootfs holds the rootfs key on the base image (and, inherited,
	// on every final image built from it).
	LabelRootfs = "org.aimi.sandbox-rootfs"
	// DefaultTag is the image the daemon runs by default (sandbox.image).
	DefaultTag = "aimi-sandbox:latest"
	// BaseRepo is the repository of the imported Debian base images, tagged
	// with a prefix of their rootfs key.
	BaseRepo = "aimi-sandbox-base"
	// RunnerPath is where acp-runner lives in the image.
	RunnerPath = "/usr/local/bin/acp-runner"
	// Workspace is the directory acp-runner works in, owned by the user.
	Workspace = "/workspace"
	// recipeVersion changes whenever the rootfs layout or the final layer's
	// recipe changes in a way the keys would not otherwise see.
	recipeVersion = "aimi-sandbox/1"
)

// DefaultPackages are the Debian packages of the sandbox rootfs: git and
// the CA bundle the runner needs, dash as /bin/sh, the handful of core
// tools an agent's terminal commands (ls, cat, grep, find, sed) expect, and
// libc-bin for the C.UTF-8 locale (without it perl, which git uses for
// some commands, warns on every start).
var DefaultPackages = []string{"ca-certificates", "coreutils", "dash", "findutils", "git", "grep", "libc-bin", "sed"}

// DefaultUser is the unprivileged account acp-runner runs as.
var DefaultUser = User{Name: "aimi", UID: 1000, GID: 1000, Home: "/home/aimi"}

// Options says what to build. The zero value builds DefaultTag from
// ./cmd/acp-runner of the module around the working directory.
type Options struct {
	// Tag of the final image; default DefaultTag. Tests use their own tag.
	Tag string
	// CacheDir holds the rootfs tarballs; default $XDG_CACHE_HOME/aimi/sandbox
	// (os.UserCacheDir). Deleting it forces a fresh download.
	CacheDir string
	// ModuleDir is the Go module holding RunnerPackage; default: the nearest
	// directory with a go.mod above the working directory.
	ModuleDir string
	// RunnerPackage is built with CGO_ENABLED=0; default ./cmd/acp-runner.
	RunnerPackage string
	// RunnerBinary, when set, is used as acp-runner instead of building.
	RunnerBinary string
	// Refresh ignores every cache: the packages are downloaded again (new
	// Debian point and security releases), the base re-imported, the final
	// layer rebuilt.
	Refresh bool
	// Release is the Debian suite of the rootfs; default bookworm.
	Release string
	// Packages of the rootfs; default DefaultPackages (always sorted).
	Packages []string
	// Labels are added to the final image (and change its content key).
	Labels map[string]string
	// Env lines (KEY=VALUE) added to the image's defaults (and its key).
	Env []string
	// Client talks to the engine; default client.FromEnv with API version
	// negotiation, closed at the end.
	Client client.APIClient
	// Logger for progress; default slog.Default().
	Logger *slog.Logger
}

// Result tells what Build did and what it reused.
type Result struct {
	Ref          string // the tag given (or DefaultTag)
	ID           string // image id (sha256:...)
	Key          string // content key (LabelKey)
	RootfsKey    string
	ImageCached  bool // an image with the same content key existed: only tagged
	BaseCached   bool // the imported base image existed
	RootfsCached bool // the rootfs tarball came from the cache (or was not needed)
	RootfsPath   string
	Took         time.Duration
}

// Build makes sure opts.Tag names a sandbox image holding the current
// acp-runner, and says whether an existing image was reused.
func Build(ctx context.Context, opts Options) (imageRef string, cached bool, err error) {
	r, err := BuildDetailed(ctx, opts)
	if err != nil {
		return "", false, err
	}
	return r.Ref, r.ImageCached, nil
}

// rootfsConfig is everything that decides the rootfs tarball's content.
type rootfsConfig struct {
	Release   string
	Arch      string // Debian architecture name
	Packages  []string
	User      User
	Workspace string
	EtcApt    string
	// Links are symlinks (path -> target) the packages' maintainer
	// scripts would have made (update-alternatives), written after every
	// package; a path a package already ships is left alone.
	Links []Link
}

// Link is one symlink in a rootfs: Path (absolute, in the image) points to
// Target.
type Link struct{ Path, Target string }

func (c rootfsConfig) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nrelease=%s\narch=%s\npackages=%s\nuser=%s:%d:%d:%s\nworkspace=%s\n",
		recipeVersion, c.Release, c.Arch, strings.Join(c.Packages, ","), c.User.Name, c.User.UID, c.User.GID, c.User.Home, c.Workspace)
	return hex.EncodeToString(h.Sum(nil))
}

// BuildDetailed is Build with the full account of what was reused. Three
// caches, cheapest first: the final image this builder committed and
// recorded for the content key (tag it, done; see record.go); the imported base image of the rootfs key; the rootfs tarball
// in CacheDir. Concurrent builds (several test packages at once) are
// serialised by a lock file in CacheDir.
func BuildDetailed(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	opts, pkgs, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	cli := opts.Client
	if cli == nil {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return Result{}, fmt.Errorf("docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}
	goarch, debArch, err := engineArch(ctx, cli)
	if err != nil {
		return Result{}, err
	}

	unlock, err := lockDir(ctx, opts.CacheDir)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	log.Debug("sandbox image: build lock taken", "since-start", time.Since(start).Round(time.Millisecond))

	work, err := os.MkdirTemp(opts.CacheDir, ".work-")
	if err != nil {
		return Result{}, fmt.Errorf("make build dir: %w", err)
	}
	defer os.RemoveAll(work)

	runner, err := runnerBinary(ctx, opts, goarch, work)
	if err != nil {
		return Result{}, err
	}
	log.Debug("sandbox image: acp-runner ready", "bytes", len(runner), "since-start", time.Since(start).Round(time.Millisecond))
	rc, res, cfg := opts.keys(debArch, pkgs, runner)

	// The image the tag names now, if any: replaced below, it is removed
	// when nothing else refers to it (no other tag, no container).
	var previous string
	if insp, err := cli.ImageInspect(ctx, opts.Tag); err == nil {
		previous = insp.ID
	}
	b := builder{cli: cli, log: log, opts: opts, res: &res, previous: previous, start: start}

	// 1. A final image with this content key: tag it and stop.
	if !opts.Refresh {
		if done, err := b.tagCached(ctx); err != nil || done {
			return res, err
		}
	}
	// 2. The base image; 3. the rootfs tarball it is imported from.
	baseRef := BaseRepo + ":" + res.RootfsKey[:16]
	if err := b.ensureBase(ctx, baseRef, rc, work); err != nil {
		return res, err
	}
	// 4. The final layer: acp-runner and the image config.
	id, err := commitFinal(ctx, cli, baseRef, runner, opts.Tag, cfg)
	if err != nil {
		return res, err
	}
	res.ID = id
	if err := recordImage(opts.CacheDir, res.Key, id); err != nil {
		return res, err
	}
	b.done(ctx, "sandbox image: built", id)
	return res, nil
}

// removeReplaced removes the sandbox image a tag named before this build
// when the tag moved away from it and nothing else uses it, so repeated
// builds (one per acp-runner change) do not pile up untagged images. An
// image still tagged elsewhere or used by any container (a running swarm)
// stays: the engine refuses the removal and that refusal is fine. Only an
// image this builder recorded is a candidate: a derived image carries the
// sandbox labels too.
func removeReplaced(ctx context.Context, cli client.APIClient, log *slog.Logger, cacheDir, previous, current string) {
	if previous == "" || previous == current || !isRecorded(cacheDir, previous) {
		return
	}
	insp, err := cli.ImageInspect(ctx, previous)
	if err != nil || len(insp.RepoTags) > 0 || insp.Config == nil || insp.Config.Labels[LabelSandboxImage] != "true" {
		return
	}
	if _, err := cli.ImageRemove(ctx, previous, image.RemoveOptions{PruneChildren: true}); err != nil {
		log.Debug("sandbox image: replaced image kept", "id", short(previous), "why", err)
		return
	}
	log.Info("sandbox image: replaced image removed", "id", short(previous))
}

// DefaultCacheDir is $XDG_CACHE_HOME/aimi/sandbox (or the platform's user
// cache dir). With neither XDG_CACHE_HOME nor HOME set (some CI
// environments), a per-user directory under the system temp dir.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), fmt.Sprintf("aimi-cache-%d", os.Getuid()), "sandbox"), nil
	}
	return filepath.Join(dir, "aimi", "sandbox"), nil
}

// finalConfig is the image config of the final layer.
func finalConfig(extraEnv []string, labels map[string]string) *container.Config {
	u := DefaultUser
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + u.Home,
		"USER=" + u.Name,
		"LANG=C.UTF-8",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		"AIMI_WORKSPACE=" + Workspace,
		// No AIMI_AGENT default here: acp-runner picks acp when
		// AIMI_AGENT_COMMAND is set and the demo agent otherwise, and an
		// image default would defeat that choice.
	}
	return &container.Config{
		Env:        append(env, extraEnv...),
		WorkingDir: Workspace,
		// Numeric, so runtimes that check "non-root" without reading
		// /etc/passwd (Kubernetes runAsNonRoot) accept it.
		User:       fmt.Sprintf("%d:%d", u.UID, u.GID),
		Entrypoint: []string{RunnerPath},
		Cmd:        []string{},
		Labels:     labels,
	}
}

// contentKey hashes everything the final image is made of. The config is
// hashed as JSON (encoding/json sorts map keys, so labels hash stably).
func contentKey(rootfsKey string, runnerSum []byte, cfg *container.Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nrootfs=%s\nrunner=%x\n", recipeVersion, rootfsKey, runnerSum)
	_ = json.NewEncoder(h).Encode(cfg)
	return hex.EncodeToString(h.Sum(nil))
}

// runnerBinary returns acp-runner's bytes: opts.RunnerBinary, or a fresh
// static build. -trimpath and -buildvcs=false make the binary depend on the
// code only, so an unrelated commit does not change the content key.
func runnerBinary(ctx context.Context, opts Options, goarch, work string) ([]byte, error) {
	if opts.RunnerBinary != "" {
		b, err := os.ReadFile(opts.RunnerBinary)
		if err != nil {
			return nil, fmt.Errorf("read acp-runner binary: %w", err)
		}
		return b, nil
	}
	dir := opts.ModuleDir
	if dir == "" {
		d, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	out := filepath.Join(work, "acp-runner")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-o", out, opts.RunnerPackage)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build acp-runner (%s in %s, CGO_ENABLED=0): %w\n%s", opts.RunnerPackage, dir, err, strings.TrimSpace(string(msg)))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("read built acp-runner: %w", err)
	}
	return b, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the Go module: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the aimi source tree or set Options.ModuleDir")
		}
		dir = parent
	}
}

func debianArch(goarch string) (string, error) {
	switch goarch {
	case "amd64", "arm64", "s390x", "riscv64":
		return goarch, nil
	case "arm":
		return "armhf", nil
	case "386":
		return "i386", nil
	case "ppc64le":
		return "ppc64el", nil
	}
	return "", fmt.Errorf("engine architecture %q has no Debian equivalent the sandbox builder knows", goarch)
}

// importBase imports the rootfs tarball as the base image.
func importBase(ctx context.Context, cli client.APIClient, tarPath, ref, rootfsKey string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return fmt.Errorf("open rootfs tarball: %w", err)
	}
	defer f.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, ref, image.ImportOptions{
		Changes: []string{"LABEL " + LabelRootfs + "=" + rootfsKey, "ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"},
		Message: "aimi sandbox rootfs " + rootfsKey[:16],
	})
	if err != nil {
		return fmt.Errorf("import sandbox rootfs %s as %s: %w", tarPath, ref, err)
	}
	defer rc.Close()
	if _, err := readJSONStream(rc); err != nil {
		return fmt.Errorf("import sandbox rootfs %s as %s: %w (delete the tarball to rebuild it)", tarPath, ref, err)
	}
	return nil
}

// commitFinal makes the final layer: a container created (never started)
// from the base, acp-runner copied in, committed with the image config.
// One create and one commit; the legacy builder would create and commit a
// container per Dockerfile instruction, which on fuse-overlayfs took about
// 5 s each (a one-COPY, six-config-line Dockerfile: 54 s).
func commitFinal(ctx context.Context, cli client.APIClient, baseRef string, runner []byte, tag string, cfg *container.Config) (string, error) {
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: baseRef, Entrypoint: []string{RunnerPath}, Labels: map[string]string{}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create build container from %s: %w", baseRef, err)
	}
	defer func() {
		// The build container never ran; removing it must not depend on
		// the caller's context still being alive.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = cli.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
	}()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: path.Base(RunnerPath), Mode: 0o755, Size: int64(len(runner)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		return "", fmt.Errorf("pack acp-runner: %w", err)
	}
	if _, err := tw.Write(runner); err != nil {
		return "", fmt.Errorf("pack acp-runner: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("pack acp-runner: %w", err)
	}
	if err := cli.CopyToContainer(ctx, created.ID, path.Dir(RunnerPath), &buf, container.CopyToContainerOptions{}); err != nil {
		return "", fmt.Errorf("copy acp-runner into the build container: %w", err)
	}
	resp, err := cli.ContainerCommit(ctx, created.ID, container.CommitOptions{
		Reference: tag, Comment: "aimi sandbox: acp-runner", Config: cfg,
	})
	if err != nil {
		return "", fmt.Errorf("commit sandbox image %s: %w", tag, err)
	}
	return resp.ID, nil
}

// readJSONStream drains an engine progress stream, returning the image id
// it announces (aux.ID) or the error it reports.
func readJSONStream(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	var tail []string
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Aux json.RawMessage `json:"aux"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return id, nil
		} else if err != nil {
			return id, fmt.Errorf("read engine progress: %w", err)
		}
		if msg.Error != "" {
			return id, fmt.Errorf("engine: %s (after: %s)", msg.Error, strings.Join(tail, " | "))
		}
		if msg.Stream != "" {
			tail = append(tail, strings.TrimSpace(msg.Stream))
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		if len(msg.Aux) > 0 {
			var aux struct{ ID string }
			if json.Unmarshal(msg.Aux, &aux) == nil && aux.ID != "" {
				id = aux.ID
			}
		}
		if strings.HasPrefix(msg.Status, "sha256:") {
			id = strings.TrimSpace(msg.Status) // ImageImport answers with the id as status
		}
	}
}

// lockDir takes an exclusive flock on CacheDir/build.lock, honouring ctx
// while it waits.
func lockDir(ctx context.Context, dir string) (func(), error) {
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, "build.lock"), 0o644)
	if err != nil {
		return nil, fmt.Errorf("wait for another sandbox image build: %w", err)
	}
	return func() { _ = unlock() }, nil
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// RemoveTag removes one tag of a sandbox image (the image itself goes when
// it was its last tag) while holding the build lock, so a concurrent Build
// that found that image by its key does not lose it between finding and
// tagging it. cacheDir "" means DefaultCacheDir. A missing tag is no error.
func RemoveTag(ctx context.Context, cli client.APIClient, cacheDir, tag string) error {
	if cacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return err
		}
		cacheDir = d
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("make sandbox image cache dir: %w", err)
	}
	unlock, err := lockDir(ctx, cacheDir)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := cli.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove sandbox image tag %s: %w", tag, err)
	}
	return nil
}
