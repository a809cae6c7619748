package container

import (
	"context"
	"fmt"
	"maps"
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
// b.Labels and b.Env. The build container carries b.BuildLabels (a daemon
// killed meanwhile leaves one its next start removes by them) and is
// removed whatever happens.
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
	bl := maps.Clone(b.Labels)
	if bl == nil {
		bl = map[string]string{}
	}
	maps.Copy(bl, b.BuildLabels)
	created, err := d.cli.ContainerCreate(ctx, &container.Config{Image: base.ID, Labels: bl, User: cfg.User},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
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
	if err := d.cli.CopyToContainer(ctx, created.ID, b.Dir, b.Tree, container.CopyToContainerOptions{CopyUIDGID: true}); err != nil {
		return "", fmt.Errorf("build image %s: copy the tree in: %w", b.Ref, err)
	}
	resp, err := d.cli.ContainerCommit(ctx, created.ID, container.CommitOptions{Reference: b.Ref, Config: &cfg, Comment: "aimi workspace"})
	if err != nil {
		return "", fmt.Errorf("build image %s: commit: %w", b.Ref, err)
	}
	return resp.ID, nil
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
