package container

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/engine"
)

var _ engine.Images = (*Docker)(nil)

// buildTimeout bounds one BuildImage: a create, the copy of a tree of up
// to contract.MaxWorkspaceBytes, a commit.
const buildTimeout = 10 * time.Minute

// BuildImage makes b.Ref from b.Base plus b.Tree unpacked at b.Dir: a
// container created (never started) from the base, the tree copied in
// owned by the image's user, committed with the base's configuration plus
// b.Labels and b.Env. The build container is named b.BuildName (a daemon
// killed meanwhile leaves one its next start finds by it) and is removed
// whatever happens.
func (d *Docker) BuildImage(ctx context.Context, b engine.ImageBuild) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	base, err := d.cli.ImageInspect(ctx, b.Base)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("build image %s: %w: %s (%s)", b.Ref, engine.ErrImageNotFound, b.Base, imageBuildHint)
	}
	if err != nil {
		return "", fmt.Errorf("build image %s: inspect %s: %w", b.Ref, b.Base, err)
	}
	if base.Config == nil {
		return "", fmt.Errorf("build image %s: %s has no configuration", b.Ref, b.Base)
	}
	bc := base.Config
	cfg := container.Config{
		User: bc.User, Env: append(append([]string(nil), bc.Env...), b.Env...), Entrypoint: bc.Entrypoint, Cmd: bc.Cmd,
		WorkingDir: bc.WorkingDir, Labels: maps.Clone(bc.Labels), StopSignal: bc.StopSignal, Volumes: bc.Volumes,
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	maps.Copy(cfg.Labels, b.Labels)
	// The engine's commit copies the build container's labels onto the
	// image: it carries the image's own only.
	created, err := d.cli.ContainerCreate(ctx, &container.Config{Image: base.ID, Labels: b.Labels, User: cfg.User},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, b.BuildName)
	if err != nil {
		return "", fmt.Errorf("build image %s: create its build container: %w", b.Ref, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := d.cli.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			d.log.Warn("remove an image's build container", "container", created.ID, "err", err)
		}
	}()
	tree, opts := b.Tree, container.CopyToContainerOptions{CopyUIDGID: true}
	if uid, gid, ok := numericUser(cfg.User); ok {
		// The engine looks a numeric user up by name (getent) and fails:
		// the entries are given the owner here instead.
		tree, opts = ownedTar(b.Tree, uid, gid), container.CopyToContainerOptions{}
	}
	if err := d.cli.CopyToContainer(ctx, created.ID, b.Dir, tree, opts); err != nil {
		return "", fmt.Errorf("build image %s: copy the tree in: %w", b.Ref, err)
	}
	resp, err := d.cli.ContainerCommit(ctx, created.ID, container.CommitOptions{Reference: b.Ref, Config: &cfg, Comment: "aimi workspace"})
	if err != nil {
		return "", fmt.Errorf("build image %s: commit: %w", b.Ref, err)
	}
	return resp.ID, nil
}

// numericUser parses a "uid[:gid]" user of numbers.
func numericUser(u string) (uid, gid int, ok bool) {
	us, gs, hasGid := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = uid
	if hasGid {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// ownedTar is the tar stream in with every entry owned by uid:gid, but
// regular files no one may write, which stay root's: git never writes
// such a file again (a pack, an object, a split index's shared part), yet
// it sets their times to now when it finds an object or reads the index
// there ("freshens" them), which the owner may do, and a change to a
// file of an image layer copies the whole file into the sandbox's
// writable layer. Not the owner, git's freshening fails, which git
// expects (it writes the object anew, or reads on).
func ownedTar(in io.Reader, uid, gid int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tr, tw := tar.NewReader(in), tar.NewWriter(pw)
		var err error
		for {
			var h *tar.Header
			if h, err = tr.Next(); err != nil {
				break
			}
			h.Uid, h.Gid, h.Uname, h.Gname = uid, gid, "", ""
			if h.Typeflag == tar.TypeReg && h.Mode&0o222 == 0 {
				h.Uid, h.Gid = 0, 0
			}
			if err = tw.WriteHeader(h); err != nil {
				break
			}
			if _, err = io.Copy(tw, tr); err != nil {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// ListImages reports every image carrying all the given labels.
func (d *Docker) ListImages(ctx context.Context, labels map[string]string) ([]engine.Image, error) {
	ctx, cancel := callCtx(ctx)
	defer cancel()
	list, err := d.cli.ImageList(ctx, image.ListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]engine.Image, 0, len(list))
	for _, s := range list {
		out = append(out, engine.Image{ID: s.ID, Tags: s.RepoTags, Labels: s.Labels, Created: time.Unix(s.Created, 0)})
	}
	return out, nil
}

// RemoveImage removes image id and its tags; engine.ErrImageInUse while
// a container of it exists (the engine's conflict: never forced).
func (d *Docker) RemoveImage(ctx context.Context, id string) error {
	ctx, cancel := callCtx(ctx)
	defer cancel()
	in, err := d.cli.ImageInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	// By id, one tag at a time: a removal by id of an image with several
	// tags is refused, and the last tag's removal deletes the image.
	refs := append(in.RepoTags, in.ID)
	for _, ref := range refs {
		_, err = d.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
		switch {
		case err == nil || errdefs.IsNotFound(err):
		case errdefs.IsConflict(err):
			return fmt.Errorf("remove image %s: %w: %v", id, engine.ErrImageInUse, err)
		default:
			return fmt.Errorf("remove image %s: %w", id, err)
		}
	}
	return nil
}
