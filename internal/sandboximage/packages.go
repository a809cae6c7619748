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
	if opts.Client == nil || opts.Repo == "" || len(opts.Packages) == 0 {
		return "", false, fmt.Errorf("package image: Client, Repo and Packages are required")
	}
	if opts.Release == "" {
		opts.Release = "bookworm"
	}
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return "", false, err
		}
		opts.CacheDir = dir
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return "", false, fmt.Errorf("make package image cache dir: %w", err)
	}
	ver, err := opts.Client.ServerVersion(ctx)
	if err != nil {
		return "", false, fmt.Errorf("reach the Docker engine (is it running? DOCKER_HOST?): %w", err)
	}
	debArch, err := debianArch(ver.Arch)
	if err != nil {
		return "", false, err
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
	ref = opts.Repo + ":" + key[:16]

	if insp, err := opts.Client.ImageInspect(ctx, ref); err == nil && insp.Config != nil && insp.Config.Labels[LabelKey] == key {
		return ref, true, nil
	} else if err != nil && !errdefs.IsNotFound(err) {
		return "", false, fmt.Errorf("inspect image %s: %w", ref, err)
	}

	unlock, err := lockDir(ctx, opts.CacheDir)
	if err != nil {
		return "", false, err
	}
	defer unlock()
	// Another process may have imported it while we waited for the lock.
	if insp, err := opts.Client.ImageInspect(ctx, ref); err == nil && insp.Config != nil && insp.Config.Labels[LabelKey] == key {
		return ref, true, nil
	}
	tarPath := filepath.Join(opts.CacheDir, "rootfs-"+opts.Release+"-"+debArch+"-"+rootfsKey[:16]+".tar")
	if _, err := os.Stat(tarPath); err != nil {
		work, err := os.MkdirTemp(opts.CacheDir, ".work-")
		if err != nil {
			return "", false, fmt.Errorf("make build dir: %w", err)
		}
		defer os.RemoveAll(work)
		log.Info("package image: building rootfs from Debian packages", "repo", opts.Repo, "packages", strings.Join(pkgs, ","))
		if err := buildRootfs(ctx, log, filepath.Join(work, "apt"), tarPath, rc); err != nil {
			return "", false, err
		}
	}
	f, err := os.Open(tarPath)
	if err != nil {
		return "", false, fmt.Errorf("open rootfs tarball: %w", err)
	}
	defer f.Close()
	rd, err := opts.Client.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, ref, image.ImportOptions{
		Changes: append(changes, "LABEL "+LabelKey+"="+key),
		Message: "aimi package image " + key[:16],
	})
	if err != nil {
		return "", false, fmt.Errorf("import %s as %s: %w", tarPath, ref, err)
	}
	defer rd.Close()
	if _, err := readJSONStream(rd); err != nil {
		return "", false, fmt.Errorf("import %s as %s: %w (delete the tarball to rebuild it)", tarPath, ref, err)
	}
	log.Info("package image: imported", "ref", ref, "took", time.Since(start).Round(time.Millisecond))
	return ref, false, nil
}
