package sandboximage

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// withDefaults fills in opts' empty fields, makes the cache directory and
// returns the sorted package list.
func (opts Options) withDefaults() (Options, []string, error) {
	if opts.Tag == "" {
		opts.Tag = DefaultTag
	}
	if opts.Release == "" {
		opts.Release = "bookworm"
	}
	if opts.RunnerPackage == "" {
		opts.RunnerPackage = "./cmd/acp-runner"
	}
	pkgs := append([]string(nil), opts.Packages...)
	if len(pkgs) == 0 {
		pkgs = append(pkgs, DefaultPackages...)
	}
	sort.Strings(pkgs)
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return opts, nil, err
		}
		opts.CacheDir = dir
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return opts, nil, fmt.Errorf("make sandbox image cache dir: %w", err)
	}
	return opts, pkgs, nil
}

// keys are the rootfs recipe, the result's keys and paths and the final
// image's config (labelled with its content key) for this runner binary.
func (opts Options) keys(debArch string, pkgs []string, runner []byte) (rootfsConfig, Result, *container.Config) {
	runnerSum := sha256.Sum256(runner)
	rc := rootfsConfig{Release: opts.Release, Arch: debArch, Packages: pkgs, User: DefaultUser, Workspace: Workspace, EtcApt: "/etc/apt"}
	res := Result{Ref: opts.Tag, RootfsKey: rc.key()}
	labels := map[string]string{LabelSandboxImage: "true", LabelRootfs: res.RootfsKey}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	cfg := finalConfig(opts.Env, labels)
	res.Key = contentKey(res.RootfsKey, runnerSum[:], cfg)
	// The key cannot hash itself; it is added after hashing.
	cfg.Labels[LabelKey] = res.Key
	res.RootfsPath = filepath.Join(opts.CacheDir, "rootfs-"+opts.Release+"-"+debArch+"-"+res.RootfsKey[:16]+".tar")
	return rc, res, cfg
}

// engineArch is the engine's Go and Debian architecture names.
func engineArch(ctx context.Context, cli client.APIClient) (goarch, debArch string, err error) {
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reach the Docker engine (is it running? DOCKER_HOST?): %w", err)
	}
	goarch = ver.Arch
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	debArch, err = debianArch(goarch)
	return goarch, debArch, err
}

// builder is one BuildDetailed's state shared by its steps.
type builder struct {
	cli      client.APIClient
	log      *slog.Logger
	opts     Options
	res      *Result
	previous string // the image opts.Tag named before, if any
	start    time.Time
}

// tagCached tags the final image recorded for the content key, if there is
// one, and says whether it did.
func (b builder) tagCached(ctx context.Context) (bool, error) {
	id, ok, err := cachedFinal(ctx, b.cli, b.opts.CacheDir, b.res.Key)
	if err != nil || !ok {
		return false, err
	}
	if err := b.cli.ImageTag(ctx, id, b.opts.Tag); err != nil {
		return false, fmt.Errorf("tag cached sandbox image %s as %s: %w", id, b.opts.Tag, err)
	}
	b.res.ID, b.res.ImageCached, b.res.BaseCached, b.res.RootfsCached = id, true, true, true
	b.done(ctx, "sandbox image: up to date", id)
	return true, nil
}

// ensureBase makes sure the base image baseRef of the rootfs key exists,
// importing it from the rootfs tarball, built first when not cached.
func (b builder) ensureBase(ctx context.Context, baseRef string, rc rootfsConfig, work string) error {
	res, opts, log := b.res, b.opts, b.log
	insp, err := b.cli.ImageInspect(ctx, baseRef)
	if !opts.Refresh && err == nil && insp.Config != nil && insp.Config.Labels[LabelRootfs] == res.RootfsKey {
		res.BaseCached, res.RootfsCached = true, true
		return nil
	}
	if !opts.Refresh && err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("inspect sandbox base image %s: %w", baseRef, err)
	}
	if _, err := os.Stat(res.RootfsPath); err == nil && !opts.Refresh {
		res.RootfsCached = true
		log.Info("sandbox rootfs: from cache", "path", res.RootfsPath)
	} else {
		log.Info("sandbox rootfs: building from Debian packages", "release", opts.Release, "arch", rc.Arch, "packages", strings.Join(rc.Packages, ","))
		if err := buildRootfs(ctx, log, filepath.Join(work, "apt"), res.RootfsPath, rc); err != nil {
			return err
		}
	}
	if err := importBase(ctx, b.cli, res.RootfsPath, baseRef, res.RootfsKey); err != nil {
		return err
	}
	log.Info("sandbox base image: imported", "ref", baseRef)
	return nil
}

// done removes the replaced image, stamps the time taken and logs msg.
func (b builder) done(ctx context.Context, msg, id string) {
	removeReplaced(ctx, b.cli, b.log, b.opts.CacheDir, b.previous, id)
	b.res.Took = time.Since(b.start)
	b.log.Info(msg, "tag", b.opts.Tag, "id", short(id), "took", b.res.Took.Round(time.Millisecond))
}
