package swarmmode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"time"

	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Swarm mode before Docker 23 (swarmkit before its 2023 fix) never marks
// the tasks of a removed job service for removal, and its task reaper
// keeps no history limit for jobs: the tasks stay in the managers' store
// and every node keeps its finished task container, with the workspace
// and the log, after the service is gone. A node removes a task's
// container only once the managers deleted the task, which on those
// engines nothing but a new leader does. So Remove removes the containers
// itself, through each node's engine (Options.NodeHost), and says which
// it could not, by node and container.

// leftoverWait is how long Remove, without the nodes' engines, waits for
// the cluster to delete a removed service's tasks (a fixed engine does it
// in a moment, and its nodes then remove the containers) before it counts
// their containers as left on their nodes.
const leftoverWait = 3 * time.Second

// taskContainer is the container a node made for one of a service's tasks.
type taskContainer struct {
	task, nodeID, id string
}

// taskContainers lists the containers the nodes made for the service's
// tasks: listed before the service is removed, since the tasks of a
// removed service cannot be listed by service any more.
func (e *Engine) taskContainers(ctx context.Context, serviceID string) []taskContainer {
	tasks, err := e.tasksOf(ctx, serviceID)
	if err != nil {
		e.log.Warn("the service's tasks could not be listed; their containers on the nodes are not checked after its removal", "service", serviceID, "err", err)
		return nil
	}
	var out []taskContainer
	for _, t := range tasks {
		if cs := t.Status.ContainerStatus; cs != nil && idRE.MatchString(cs.ContainerID) && t.NodeID != "" {
			out = append(out, taskContainer{task: t.ID, nodeID: t.NodeID, id: cs.ContainerID})
		}
	}
	return out
}

// removeLeftovers removes, once their service is gone, the task
// containers the cluster left on their nodes: through the node's engine
// when Options.NodeHost names it, else it reports them. The error wraps
// engine.ErrLeftOnNode and names each container it could not remove, its
// node and why.
func (e *Engine) removeLeftovers(ctx context.Context, sb sandbox, tcs []taskContainer) error {
	if len(tcs) == 0 {
		return nil
	}
	if e.opts.NodeHost == "" {
		// Only what the cluster keeps is left; with the nodes' engines
		// at hand, asking them is as quick as waiting to know.
		tcs = e.stillAssigned(ctx, tcs)
	}
	var left []string
	for _, tc := range tcs {
		node, err := e.removeOnNode(ctx, sb, tc)
		if err != nil {
			left = append(left, fmt.Sprintf("node %s: container %.12s (%v)", node, tc.id, err))
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	name := sb.own.name
	e.log.Warn("task containers left on the nodes", "container", name, "left", left)
	return fmt.Errorf("%s: %w: %s. Remove it there with 'docker container rm -v ID', or set engine.node_host so that cleanup can",
		name, engine.ErrLeftOnNode, strings.Join(left, "; "))
}

// stillAssigned is the containers of tcs whose task the cluster still
// has after up to leftoverWait: the others' nodes remove them.
func (e *Engine) stillAssigned(ctx context.Context, tcs []taskContainer) []taskContainer {
	wctx, cancel := context.WithTimeout(ctx, leftoverWait)
	defer cancel()
	for {
		var kept []taskContainer
		for _, tc := range tcs {
			if _, _, err := e.cli.TaskInspectWithRaw(wctx, tc.task); !isNotFound(err) {
				kept = append(kept, tc)
			}
		}
		tcs = kept
		if len(tcs) == 0 || ctxutil.Sleep(wctx, 250*time.Millisecond) != nil {
			return tcs
		}
	}
}

// hostnameRE is what a node's hostname must be to go into an endpoint: a
// node names itself, and "../" in a unix socket path would point
// engine.node_host at another engine.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$`)

// removeOnNode removes one task container through its node's engine, when
// its labels say it is the sandbox's, and returns the node's name.
func (e *Engine) removeOnNode(ctx context.Context, sb sandbox, tc taskContainer) (string, error) {
	n, _, err := e.cli.NodeInspectWithRaw(ctx, tc.nodeID)
	if err != nil {
		return tc.nodeID, fmt.Errorf("the node is not known to the manager: %w", err)
	}
	host := termsafe.String(n.Description.Hostname)
	if len(host) > 64 {
		host = host[:64]
	}
	if host == "" {
		host = tc.nodeID
	}
	if e.opts.NodeHost == "" {
		return host, errors.New("engine.node_host is not set")
	}
	if down, why := e.nodeDown(ctx, tc.nodeID); down {
		return host, fmt.Errorf("the node is %s", why)
	}
	if !hostnameRE.MatchString(n.Description.Hostname) || net.ParseIP(n.Status.Addr) == nil {
		return host, fmt.Errorf("the node's hostname or address (%q) cannot name its engine", termsafe.String(n.Status.Addr))
	}
	cli, err := e.nodeClient(NodeEndpoint(e.opts.NodeHost, n.Description.Hostname, n.Status.Addr))
	if err != nil {
		return host, err
	}
	in, err := cli.ContainerInspect(ctx, tc.id)
	if errdefs.IsNotFound(err) {
		return host, nil
	}
	if err != nil {
		return host, fmt.Errorf("its engine did not answer: %w", err)
	}
	if in.Config == nil || !sb.own.owns(in.Config.Labels) {
		return host, errors.New("the container there is not this sandbox's (its labels say otherwise); left alone")
	}
	err = cli.ContainerRemove(ctx, tc.id, containertypes.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || errdefs.IsNotFound(err) || strings.Contains(err.Error(), "already in progress") {
		return host, nil
	}
	return host, fmt.Errorf("its engine refused: %w", err)
}

// NodeEndpoint is a node's Engine API endpoint: the template (the
// daemon's engine.node_host) with {node} replaced by the node's hostname
// and {addr} by its address.
func NodeEndpoint(template, hostname, addr string) string {
	return strings.NewReplacer("{node}", hostname, "{addr}", addr).Replace(template)
}

// nodeClient is the client of the engine at host, made once and kept.
func (e *Engine) nodeClient(host string) (client.APIClient, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cli, ok := e.nodeClients[host]; ok {
		return cli, nil
	}
	cli, err := e.opts.NodeClient(host)
	if err != nil {
		return nil, fmt.Errorf("connect to the node's engine at %s (engine.node_host): %w", host, err)
	}
	cli = timedClient{APIClient: cli, d: e.opts.CallTimeout}
	e.nodeClients[host] = cli
	return cli, nil
}

// defaultNodeClient connects to a node's engine with the Docker client's
// TLS settings (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), as the manager's.
func defaultNodeClient(host string) (client.APIClient, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation())
}
