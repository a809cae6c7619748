package container

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
)

// NetworkInfo describes a network EnsureNetwork made or found.
type NetworkInfo struct{ ID, Name, Gateway, Subnet string }

// EnsureNetwork returns the bridge network name, creating it if missing with
// the given labels (plus LabelSandbox=true) and inter-container traffic
// disabled. One such network per swarm keeps its containers from reaching
// each other (the bridge drops container-to-container packets) while taking
// one entry of the engine's small default address pool instead of one per
// container. An existing network of that name that does not disable
// inter-container traffic is refused rather than silently used. Concurrent
// calls for the same name are safe: the loser of the create race uses the
// winner's network.
func (d *Docker) EnsureNetwork(ctx context.Context, name string, labels map[string]string) (NetworkInfo, error) {
	if err := checkName(name); err != nil {
		return NetworkInfo{}, fmt.Errorf("ensure network: %w", err)
	}
	if info, err := d.networkInfo(ctx, name); err == nil || !errdefs.IsNotFound(err) {
		return info, err
	}
	all := map[string]string{LabelSandbox: "true"}
	for k, v := range labels {
		all[k] = v
	}
	_, err := d.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:  "bridge",
		Options: map[string]string{iccOption: "false"},
		Labels:  all,
	})
	// The client asks engines older than API 1.44 to check for duplicate
	// names, so a concurrent creator shows up as a conflict here.
	if err != nil && !errdefs.IsConflict(err) {
		return NetworkInfo{}, fmt.Errorf("create network %s: %w (the engine's address pools may be exhausted: remove unused networks)", name, err)
	}
	return d.networkInfo(ctx, name)
}

func (d *Docker) networkInfo(ctx context.Context, name string) (NetworkInfo, error) {
	n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return NetworkInfo{}, err
		}
		return NetworkInfo{}, fmt.Errorf("inspect network %s: %w", name, err)
	}
	if n.Name != name {
		// Inspect also resolves id prefixes; only an exact name counts.
		return NetworkInfo{}, errdefs.NotFound(fmt.Errorf("network %s not found", name))
	}
	if n.Driver != "bridge" || n.Options[iccOption] != "false" {
		return NetworkInfo{}, fmt.Errorf("network %s exists but is not a bridge with %s=false, so it would not isolate containers; remove it or pick another name", name, iccOption)
	}
	info := NetworkInfo{ID: n.ID, Name: n.Name}
	if len(n.IPAM.Config) > 0 {
		info.Subnet = n.IPAM.Config[0].Subnet
		info.Gateway = n.IPAM.Config[0].Gateway
	}
	return info, nil
}

// RemoveNetworkIfUnused removes the network unless some container, in any
// state, still refers to it. (The network's own endpoint list only shows
// running containers; a created one that has not started yet would lose its
// network.) A missing network, or one that gained a container meanwhile, is
// not an error.
func (d *Docker) RemoveNetworkIfUnused(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove network: %w", err)
	}
	users, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Limit: 1, Filters: filters.NewArgs(filters.Arg("network", name))})
	if err != nil {
		return fmt.Errorf("remove network %s: list its containers: %w", name, err)
	}
	if len(users) > 0 {
		return nil
	}
	err = d.cli.NetworkRemove(ctx, name)
	switch {
	case err == nil, errdefs.IsNotFound(err):
		return nil
	case errdefs.IsForbidden(err), errdefs.IsConflict(err):
		// "has active endpoints": a container joined since the list.
		d.log.Info("network still in use, kept", "network", name, "err", err)
		return nil
	default:
		return fmt.Errorf("remove network %s: %w", name, err)
	}
}
