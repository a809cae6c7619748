package sandboximage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// PackageImageOptions describe an image made only of Debian packages (no
// acp-runner), through the same download-and-merge route as the sandbox
// rootfs. Tests use it for images the project does not ship, such as a
// Docker engine to run inside a container.
type PackageImageOptions struct {
	// Repo is the image repository; the tag is a prefix of the content key.
	Repo string
	// Packages to install with their dependency closure (sorted here).
	Packages []string
	// Links are symlinks the maintainer scripts would have made.
	Links []Link
	// Entrypoint and Cmd of the image.
	Entrypoint []string
	Cmd        []string
	// Release is the Debian suite; default bookworm.
	Release string
	// CacheDir holds the rootfs tarballs; default DefaultCacheDir.
	CacheDir string
	// Client talks to the engine (required).
	Client client.APIClient
	// Logger for progress; default slog.Default().
	Logger *slog.Logger
}

// PackageImage returns a reference to the image opts describe, importing it
// when no image with its content key exists: the rootfs tarball is reused
// from CacheDir when present, built from Debian packages otherwise. Builds
// take the cache's lock, so concurrent test packages share one build.
func PackageImage(ctx context.Context, opts PackageImageOptions) (ref string, cached bool, err error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := opts.fill(); err != nil {
		return "", false, err
	}
	p, err := planPackageImage(ctx, opts)
	if err != nil {
		return "", false, err
	}
	if insp, err := opts.Client.ImageInspect(ctx, p.ref); err == nil && insp.Config != nil && insp.Config.Labels[LabelKey] == p.key {
		return p.ref, true, nil
	} else if err != nil && !errdefs.IsNotFound(err) {
		return "", false, fmt.Errorf("inspect image %s: %w", p.ref, err)
	}

	unlock, err := lockDir(ctx, opts.CacheDir)
	if err != nil {
		return "", false, err
	}
	defer unlock()
	// Another process may have imported it while we waited for the lock.
	if insp, err := opts.Client.ImageInspect(ctx, p.ref); err == nil && insp.Config != nil && insp.Config.Labels[LabelKey] == p.key {
		return p.ref, true, nil
	}
	tarPath := filepath.Join(opts.CacheDir, "rootfs-"+opts.Release+"-"+p.rc.Arch+"-"+p.rootfsKey[:16]+".tar")
	if _, err := os.Stat(tarPath); err != nil {
		work, err := os.MkdirTemp(opts.CacheDir, ".work-")
		if err != nil {
			return "", false, fmt.Errorf("make build dir: %w", err)
		}
		defer os.RemoveAll(work)
		log.Info("package image: building rootfs from Debian packages", "repo", opts.Repo, "packages", strings.Join(p.rc.Packages, ","))
		if err := buildRootfs(ctx, log, filepath.Join(work, "apt"), tarPath, p.rc); err != nil {
			return "", false, err
		}
	}
	if err := p.importFrom(ctx, opts.Client, tarPath); err != nil {
		return "", false, err
	}
	log.Info("package image: imported", "ref", p.ref, "took", time.Since(start).Round(time.Millisecond))
	return p.ref, false, nil
}

// fill checks the required options and sets the defaults of the others,
// making the cache directory.
func (o *PackageImageOptions) fill() error {
	if o.Client == nil || o.Repo == "" || len(o.Packages) == 0 {
		return fmt.Errorf("package image: Client, Repo and Packages are required")
	}
	if o.Release == "" {
		o.Release = "bookworm"
	}
	if o.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return err
		}
		o.CacheDir = dir
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return fmt.Errorf("make package image cache dir: %w", err)
	}
	return nil
}

// packagePlan is what a package image is made of and the reference its
// content key gives it.
type packagePlan struct {
	rc        rootfsConfig
	rootfsKey string   // names the rootfs tarball in the cache
	changes   []string // Dockerfile instructions applied on import
	key       string
	ref       string
}

// planPackageImage works out the package image of opts for the engine's
// architecture.
func planPackageImage(ctx context.Context, opts PackageImageOptions) (packagePlan, error) {
	ver, err := opts.Client.ServerVersion(ctx)
	if err != nil {
		return packagePlan{}, fmt.Errorf("reach the Docker engine (is it running? DOCKER_HOST?): %w", err)
	}
	debArch, err := debianArch(ver.Arch)
	if err != nil {
		return packagePlan{}, err
	}
	pkgs := append([]string(nil), opts.Packages...)
	sort.Strings(pkgs)
	links := append([]Link(nil), opts.Links...)
	sort.Slice(links, func(i, j int) bool { return links[i].Path < links[j].Path })
	rc := rootfsConfig{Release: opts.Release, Arch: debArch, Packages: pkgs, User: DefaultUser, Workspace: Workspace, EtcApt: "/etc/apt", Links: links}
	changes := []string{"ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
	if len(opts.Entrypoint) > 0 {
		b, _ := json.Marshal(opts.Entrypoint)
		changes = append(changes, "ENTRYPOINT "+string(b))
	}
	if len(opts.Cmd) > 0 {
		b, _ := json.Marshal(opts.Cmd)
		changes = append(changes, "CMD "+string(b))
	}
	rootfsKey := rc.key()
	sum := sha256.Sum256([]byte(recipeVersion + "\npackage-image\nrootfs=" + rootfsKey + "\n" + strings.Join(changes, "\n")))
	key := hex.EncodeToString(sum[:])
	return packagePlan{rc: rc, rootfsKey: rootfsKey, changes: changes, key: key, ref: opts.Repo + ":" + key[:16]}, nil
}

// importFrom imports the rootfs tarball at tarPath as the plan's image.
func (p packagePlan) importFrom(ctx context.Context, c client.APIClient, tarPath string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return fmt.Errorf("open rootfs tarball: %w", err)
	}
	defer f.Close()
	rd, err := c.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, p.ref, image.ImportOptions{
		Changes: append(p.changes, "LABEL "+LabelKey+"="+p.key),
		Message: "aimi package image " + p.key[:16],
	})
	if err != nil {
		return fmt.Errorf("import %s as %s: %w", tarPath, p.ref, err)
	}
	defer rd.Close()
	if _, err := readJSONStream(rd); err != nil {
		return fmt.Errorf("import %s as %s: %w (delete the tarball to rebuild it)", tarPath, p.ref, err)
	}
	return nil
}
