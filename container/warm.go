package container

import (
	"context"
	"fmt"

	"github.com/aimi-tools/swarm/engine"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
)

// Rename gives container id another name. A name another container holds
// is ErrConflict, as for Create; the name must be one aimi makes.
func (d *Docker) Rename(ctx context.Context, id, name string) error {
	if err := engine.CheckName(name); err != nil {
		return fmt.Errorf("rename container %s: %w", id, err)
	}
	ctx, cancel := callCtx(ctx)
	defer cancel()
	if err := d.cli.ContainerRename(ctx, id, name); err != nil {
		if errdefs.IsConflict(err) {
			return fmt.Errorf("rename container %s to %s: %w: %v", id, name, engine.ErrConflict, err)
		}
		return fmt.Errorf("rename container %s to %s: %w", id, name, notFound(err))
	}
	return nil
}

// JoinNetwork moves a running container created on engine.NetworkNone to name
// (from EnsureNetwork), as if it had been created there: it leaves every
// other network first, so it is never on two at once.
func (d *Docker) JoinNetwork(ctx context.Context, id, name string) error {
	if name == "" || name == engine.NetworkNone || name == "host" || !engine.ValidNetwork(name) {
		return fmt.Errorf("join container %s to network %q: %w: not a sandbox network", id, name, engine.ErrInvalidSpec)
	}
	if err := d.checkNetwork(ctx, name); err != nil {
		return fmt.Errorf("join container %s to network %s: %w", id, name, err)
	}
	if err := d.LeaveNetworks(ctx, id, name); err != nil {
		return err
	}
	ctx, cancel := callCtx(ctx)
	defer cancel()
	err := d.cli.NetworkConnect(ctx, name, id, &network.EndpointSettings{})
	if err != nil && !errdefs.IsConflict(err) && !errdefs.IsForbidden(err) {
		return fmt.Errorf("join container %s to network %s: %w", id, name, notFound(err))
	}
	if err != nil {
		// Already connected (a claim redone after a restart) is fine;
		// anything else the engine refused is not.
		info, ierr := d.Inspect(ctx, id)
		if _, ok := info.Networks[name]; ierr != nil || !ok {
			return fmt.Errorf("join container %s to network %s: %w", id, name, err)
		}
	}
	return nil
}

// LeaveNetworks disconnects container id from every network but keep
// (the loopback stays): a half-claimed warm sandbox goes back to reaching
// nothing.
func (d *Docker) LeaveNetworks(ctx context.Context, id, keep string) error {
	info, err := d.Inspect(ctx, id)
	if err != nil {
		return fmt.Errorf("leave the networks of container %s: %w", id, err)
	}
	nets := map[string]bool{}
	for n := range info.Networks {
		nets[n] = true
	}
	if info.NetworkMode == engine.NetworkNone {
		nets[engine.NetworkNone] = true
	}
	for n := range nets {
		if n == keep {
			continue
		}
		cctx, cancel := callCtx(ctx)
		err := d.cli.NetworkDisconnect(cctx, n, id, true)
		cancel()
		if err != nil && !errdefs.IsNotFound(err) {
			// "none" that was left already answers with an error of its
			// own; what counts is what is left, checked below.
			d.log.Debug("network disconnect", "container", id, "network", n, "err", err)
		}
	}
	info, err = d.Inspect(ctx, id)
	if err != nil {
		return fmt.Errorf("leave the networks of container %s: %w", id, err)
	}
	for n := range info.Networks {
		if n != keep && n != engine.NetworkNone {
			return fmt.Errorf("leave the networks of container %s: still on %s", id, n)
		}
	}
	return nil
}

// ImageID is the id of the image ref names now ("" when there is none):
// a warm sandbox of an older build of the same tag is replaced.
func (d *Docker) ImageID(ctx context.Context, ref string) (string, error) {
	ctx, cancel := callCtx(ctx)
	defer cancel()
	img, err := d.cli.ImageInspect(ctx, ref)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return img.ID, nil
}
