package clustertest

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/docker/docker/api/types/swarm"
)

// NodeHostTemplate is the Engine API endpoint of every node with the
// node's hostname as {node} (the daemon's engine.node_host): each node's
// socket is in a directory named after its hostname.
func (c *Cluster) NodeHostTemplate() string {
	return "unix://" + filepath.Join(c.dir, "{node}", "docker.sock")
}

// SetAvailability sets node i's availability (active, pause, drain) on the
// manager: a drained node gets no new task.
func (c *Cluster) SetAvailability(ctx context.Context, i int, a swarm.NodeAvailability) error {
	m := c.Manager().Client
	n, _, err := m.NodeInspectWithRaw(ctx, c.Nodes[i].NodeID)
	if err != nil {
		return fmt.Errorf("inspect node %s: %w", c.Nodes[i].Name, err)
	}
	n.Spec.Availability = a
	if err := m.NodeUpdate(ctx, n.ID, n.Version, n.Spec); err != nil {
		return fmt.Errorf("set node %s %s: %w", c.Nodes[i].Name, a, err)
	}
	return nil
}
