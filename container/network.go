package container

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
)

// EnsureNetwork returns the bridge network name, creating it if missing with
// the given labels (plus contract.LabelSandbox=true) and inter-container traffic
// disabled. One such network per swarm keeps its containers from reaching
// each other (the bridge drops container-to-container packets) while taking
// one entry of the engine's small default address pool instead of one per
// container. An existing network of that name that does not disable
// inter-container traffic is refused rather than silently used.
//
// Concurrent calls for one name are safe. The engine's duplicate-name check
// is racy (engine 20.10 created 17 networks of one name for 25 concurrent
// creates), so calls through one Docker are serialised, and a creator that
// still finds several networks of its name keeps the oldest and removes its
// own, which makes racing processes converge on one network too.
func (d *Docker) EnsureNetwork(ctx context.Context, name string, labels map[string]string) (engine.NetworkInfo, error) {
	if err := engine.CheckName(name); err != nil {
		return engine.NetworkInfo{}, fmt.Errorf("ensure network: %w", err)
	}
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if info, err := d.networkInfo(ctx, name); err == nil || !errdefs.IsNotFound(err) {
		if err == nil {
			// A network of that name is used only when it is this
			// daemon's network of this swarm and repository.
			err = contract.CheckLabels(info.Labels, d.ownerOf(labels, contract.LabelSwarmID, contract.LabelProject))
			if err != nil {
				return engine.NetworkInfo{}, fmt.Errorf("network %s exists but is not this swarm's (%v); remove it or clean up the swarm it belongs to", name, err)
			}
		}
		return info, err
	}
	all := map[string]string{contract.LabelSandbox: "true"}
	for k, v := range labels {
		all[k] = v
	}
	opts := map[string]string{iccOption: "false"}
	if mtu := d.defaultMTU(ctx); mtu != "" {
		opts[mtuOption] = mtu
	}
	resp, err := d.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:  "bridge",
		Options: opts,
		Labels:  all,
	})
	if err != nil && !errdefs.IsConflict(err) {
		return engine.NetworkInfo{}, fmt.Errorf("create network %s: %w (the engine's address pools may be exhausted: remove unused networks)", name, err)
	}
	if err == nil {
		if err := d.dropDuplicate(ctx, name, resp.ID); err != nil {
			return engine.NetworkInfo{}, err
		}
	}
	return d.networkInfo(ctx, name)
}

// defaultMTU returns the MTU the engine gives its default bridge ("" if
// unknown). The engine applies its configured mtu only to that bridge;
// networks created through the API get 1500, which on a host whose uplink is
// smaller (VMs, VPNs: 1400 here) makes large packets to the outside vanish
// and TLS (git clone over https) hang.
func (d *Docker) defaultMTU(ctx context.Context) string {
	n, err := d.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil {
		d.log.Debug("default bridge MTU unknown", "err", err)
		return ""
	}
	return n.Options[mtuOption]
}

// dropDuplicate removes the network mine if an older network has the same
// name.
func (d *Docker) dropDuplicate(ctx context.Context, name, mine string) error {
	same, err := d.sameName(ctx, name)
	if err != nil {
		return err
	}
	if len(same) < 2 || same[0].ID == mine {
		return nil
	}
	d.log.Info("another creator made the same network first; removing ours", "network", name, "id", mine)
	if err := d.cli.NetworkRemove(ctx, mine); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove duplicate network %s (%.12s): %w", name, mine, err)
	}
	return nil
}

// sameName lists the networks named exactly name, oldest first (the name
// filter matches substrings).
func (d *Docker) sameName(ctx context.Context, name string) ([]network.Summary, error) {
	ns, err := d.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, fmt.Errorf("list networks named %s: %w", name, err)
	}
	var same []network.Summary
	for _, n := range ns {
		if n.Name == name {
			same = append(same, n)
		}
	}
	slices.SortFunc(same, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return same, nil
}

// networkInfo inspects the (oldest) network named exactly name; by id, since
// inspecting a name that several networks share is an "ambiguous" error.
func (d *Docker) networkInfo(ctx context.Context, name string) (engine.NetworkInfo, error) {
	same, err := d.sameName(ctx, name)
	if err != nil {
		return engine.NetworkInfo{}, err
	}
	if len(same) == 0 {
		return engine.NetworkInfo{}, errdefs.NotFound(fmt.Errorf("network %s not found", name))
	}
	n, err := d.cli.NetworkInspect(ctx, same[0].ID, network.InspectOptions{})
	if err != nil {
		return engine.NetworkInfo{}, fmt.Errorf("inspect network %s: %w", name, err)
	}
	if n.Driver != "bridge" || n.Options[iccOption] != "false" {
		return engine.NetworkInfo{}, fmt.Errorf("network %s exists but is not a bridge with %s=false, so it would not isolate containers; remove it or pick another name", name, iccOption)
	}
	info := engine.NetworkInfo{ID: n.ID, Name: n.Name, Labels: n.Labels}
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
	if err := engine.CheckName(name); err != nil {
		return fmt.Errorf("remove network: %w", err)
	}
	// Only a network of this daemon is removed, whatever name it was
	// asked for by (a swarm id from a state file, say).
	switch n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{}); {
	case errdefs.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("remove network %s: inspect it: %w", name, err)
	default:
		if err := contract.CheckLabels(n.Labels, d.ownerOf(nil)); err != nil {
			return fmt.Errorf("remove network %s: not this daemon's (%v); left alone", name, err)
		}
	}
	users, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Limit: 1, Filters: filters.NewArgs(filters.Arg("network", name))})
	if err != nil {
		return fmt.Errorf("remove network %s: list its containers: %w", name, err)
	}
	if len(users) > 0 {
		return nil
	}
	d.seenMu.Lock()
	delete(d.seen, name)
	d.seenMu.Unlock()
	err = d.cli.NetworkRemove(ctx, name)
	// "has active endpoints": a container joined since the list, or the
	// endpoint of a removed container outlived it. Engine 20.10 does that
	// when many containers are force-removed at once: for a moment the
	// container is still being removed (so its endpoint is not yet stale),
	// and afterwards the endpoint can stay behind. Clear stale endpoints
	// and try again for a bounded while, as long as no container of the
	// network exists.
	for wait := 100 * time.Millisecond; (errdefs.IsForbidden(err) || errdefs.IsConflict(err)) && wait <= 3200*time.Millisecond; wait *= 2 {
		if users, lerr := d.cli.ContainerList(ctx, container.ListOptions{All: true, Limit: 1, Filters: filters.NewArgs(filters.Arg("network", name))}); lerr != nil || len(users) > 0 {
			break // a live user: the network is in use, keep it
		}
		if d.clearStaleEndpoints(ctx, name) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		err = d.cli.NetworkRemove(ctx, name)
	}
	switch {
	case err == nil, errdefs.IsNotFound(err):
		return nil
	case errdefs.IsForbidden(err), errdefs.IsConflict(err):
		d.log.Info("network still in use, kept", "network", name, "err", err)
		return nil
	default:
		return fmt.Errorf("remove network %s: %w", name, err)
	}
}

// clearStaleEndpoints force-disconnects the endpoints of network name whose
// container no longer exists, and says how many it cleared. An endpoint of a
// live container is left alone. Failures only mean fewer cleared: the caller
// reports the network as kept.
func (d *Docker) clearStaleEndpoints(ctx context.Context, name string) int {
	n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return 0
	}
	cleared := 0
	for id, ep := range n.Containers {
		if _, err := d.cli.ContainerInspect(ctx, id); !errdefs.IsNotFound(err) {
			continue
		}
		// A forced disconnect of a container the engine no longer knows
		// deletes the endpoint by its name.
		if err := d.cli.NetworkDisconnect(ctx, n.ID, ep.Name, true); err != nil {
			d.log.Warn("clearing a stale endpoint failed", "network", name, "endpoint", ep.Name, "err", err)
			continue
		}
		d.log.Info("cleared the stale endpoint of a removed container", "network", name, "endpoint", ep.Name)
		cleared++
	}
	return cleared
}
