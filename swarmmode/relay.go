package swarmmode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// A sandbox with a relay (engine.Spec.Relay) is confined: its one network
// is an internal overlay of its own (no route off it, so no host, node,
// metadata address or internet), whose one other member is its relay, a
// service running acp-runner net-relay from the sandbox's image. The relay
// is also on a network of its own, an ordinary overlay with the nodes'
// route out, and forwards only to the daemon's door. The relay
// holds the sandbox's key; the sandbox never does. A restarted relay task
// (a node lost) comes back on another node under the same name.
const (
	objRelay    = "relay"
	objRelayNet = "relaynet"
	objNetKey   = "netkey"
	objNetCA    = "netca"
	// relayKeyFile is the key's file name under /run/secrets.
	relayKeyFile = "aimi-net-key"
)

// storedRelay is the stored spec's relay: the key and the CA are a secret
// and a config of the sandbox's.
type storedRelay struct {
	Door    string `json:"door"`
	Forward string `json:"forward"`
}

// storeRelay keeps s.Relay's key as a secret and its CA as a config.
func (e *Engine) storeRelay(ctx context.Context, s engine.Spec, svc string, objLabels func(string) map[string]string, st *storedSpec) ([]func(context.Context) error, error) {
	if s.Relay == nil {
		return nil, nil
	}
	var made []func(context.Context) error
	sec, err := e.cli.SecretCreate(ctx, swarm.SecretSpec{Annotations: swarm.Annotations{Name: objName(svc, objNetKey), Labels: objLabels(objRelay)}, Data: []byte(s.Relay.Key)})
	if err != nil {
		return made, fmt.Errorf("create %s: store the relay's key as a Swarm secret: %w", s.Name, err)
	}
	made = append(made, func(ctx context.Context) error { return e.cli.SecretRemove(ctx, sec.ID) })
	cfg, err := e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: objName(svc, objNetCA), Labels: objLabels(objRelay)}, Data: s.Relay.CA})
	if err != nil {
		return made, fmt.Errorf("create %s: store the daemon's CA as a Swarm config: %w", s.Name, err)
	}
	made = append(made, func(ctx context.Context) error { return e.cli.ConfigRemove(ctx, cfg.ID) })
	st.Relay = &storedRelay{Door: s.Relay.Door, Forward: s.Relay.Forward}
	return made, nil
}

// sandboxNetwork is the sandbox's overlay (ensureNetwork), internal and
// with its relay when it has one.
func (e *Engine) sandboxNetwork(ctx context.Context, sb sandbox, st storedSpec, objLabels func(string) map[string]string, reuse bool) (string, error) {
	netID, err := e.ensureNetwork(ctx, sb, objLabels("network"), reuse, st.Relay != nil)
	if err == nil && st.Relay != nil {
		err = e.startRelay(ctx, sb, st, netID, objLabels(objRelay), !reuse)
		if err != nil && reuse && networkMissing(err) {
			// A listed network the cluster no longer has (see
			// WriteStdin): new ones for both.
			e.log.Debug("the sandbox's listed networks are gone from the cluster; making new ones", "service", sb.svc, "err", err)
			return e.sandboxNetwork(ctx, sb, st, objLabels, false)
		}
	}
	return netID, err
}

// networkMissing reports a service create refused for a network the
// cluster does not have.
func networkMissing(err error) bool {
	return strings.Contains(err.Error(), "network") && strings.Contains(err.Error(), "not found")
}

// relayName is the relay service of the sandbox whose service is svc.
func relayName(svc string) string { return objName(svc, objRelay) }

// startRelay creates the sandbox's relay on its network netID (replacing
// one on another network, and with a new network of its own, when replace
// is set).
func (e *Engine) startRelay(ctx context.Context, sb sandbox, st storedSpec, netID string, labels map[string]string, replace bool) error {
	name := relayName(sb.svc)
	if s, _, err := e.cli.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{}); err == nil {
		if !sb.own.owns(s.Spec.Labels) {
			return fmt.Errorf("service %s is not this sandbox's (labels %v); remove it by hand", name, s.Spec.Labels)
		}
		if !replace {
			return nil
		}
		if err := e.cli.ServiceRemove(ctx, s.ID); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("replace the relay %s: %w", name, err)
		}
	}
	spec, err := e.relaySpec(ctx, sb, st, netID, labels, !replace)
	if err != nil {
		return err
	}
	if _, err := e.cli.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{}); err != nil && !errdefs.IsConflict(err) {
		return fmt.Errorf("create the relay %s of %s: %w", name, sb.own.name, err)
	}
	return nil
}

// relaySpec is the relay's service: one replica, restarted when it ends,
// no capabilities, a read-only root, small limits.
func (e *Engine) relaySpec(ctx context.Context, sb sandbox, st storedSpec, netID string, labels map[string]string, reuse bool) (swarm.ServiceSpec, error) {
	delete(labels, contract.LabelSandbox) // not a sandbox: never listed as one
	command, err := e.relayCommand(ctx, st.Image)
	if err != nil {
		return swarm.ServiceSpec{}, err
	}
	out, err := e.relayNetwork(ctx, sb, labels, reuse)
	if err != nil {
		return swarm.ServiceSpec{}, err
	}
	subnet, err := e.subnetOf(ctx, netID)
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("the network of %s: %w", sb.own.name, err)
	}
	key, _, err := e.cli.SecretInspectWithRaw(ctx, objName(sb.svc, objNetKey))
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("the relay's key of %s: %w", sb.own.name, err)
	}
	ca, _, err := e.cli.ConfigInspectWithRaw(ctx, objName(sb.svc, objNetCA))
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("the daemon's CA for the relay of %s: %w", sb.own.name, err)
	}
	one := uint64(1)
	// A relay ends at SIGTERM; a second is its grace, so that its
	// removal (and then its networks') is not held up.
	delay, grace := 2*time.Second, time.Second
	cs := &swarm.ContainerSpec{
		StopGracePeriod: &grace,
		Image:           st.Image,
		Labels:          labels,
		Command:         command,
		Args:            []string{"net-relay"},
		User:            "0", // reads its key (root's, 0400); holds no capability
		ReadOnly:        true,
		CapabilityDrop:  []string{"ALL"},
		Env: []string{
			contract.EnvNetForward + "=" + st.Relay.Forward,
			contract.EnvNetDoor + "=" + st.Relay.Door,
			contract.EnvNetSubnet + "=" + subnet,
		},
		Secrets: []*swarm.SecretReference{{SecretID: key.ID, SecretName: key.Spec.Name,
			File: &swarm.SecretReferenceFileTarget{Name: relayKeyFile, UID: "0", GID: "0", Mode: 0o400}}},
		Configs: []*swarm.ConfigReference{{ConfigID: ca.ID, ConfigName: ca.Spec.Name,
			File: &swarm.ConfigReferenceFileTarget{Name: contract.NetCAFile, UID: "0", GID: "0", Mode: 0o444}}},
	}
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: relayName(sb.svc), Labels: labels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: cs,
			Resources:     &swarm.ResourceRequirements{Limits: &swarm.Limit{NanoCPUs: 250_000_000, MemoryBytes: 64 << 20, Pids: 128}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny, Delay: &delay},
			Networks: []swarm.NetworkAttachmentConfig{
				{Target: netID, Aliases: []string{contract.NetRelayHost}},
				{Target: out},
			},
			LogDriver: &swarm.Driver{Name: "json-file", Options: map[string]string{"max-size": "1m", "max-file": "2"}},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, nil
}

// relayCommand is the command that runs image's program (its entrypoint,
// else the first word of its CMD) with net-relay, as the manager has it.
func (e *Engine) relayCommand(ctx context.Context, image string) ([]string, error) {
	img, err := e.cli.ImageInspect(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("read image %s on the manager for the relay: %w (pull or load it there too)", image, err)
	}
	if img.Config == nil || len(img.Config.Entrypoint) > 0 || len(img.Config.Cmd) == 0 {
		return nil, nil // the entrypoint, with net-relay as its argument
	}
	return img.Config.Cmd[:1], nil
}

// subnetWait bounds the wait for an overlay's subnet. The managers
// allocate it a moment after the network was created, seconds when they
// are busy: a sandbox whose relay gave up here fails before any of its
// work, so the bound is generous (a busy test cluster took over 15 s).
const subnetWait = time.Minute

// subnetOf reads an overlay's subnet once the managers allocated it.
func (e *Engine) subnetOf(ctx context.Context, netID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, subnetWait)
	defer cancel()
	for {
		n, err := e.cli.NetworkInspect(ctx, netID, network.InspectOptions{})
		if err == nil && len(n.IPAM.Config) > 0 && n.IPAM.Config[0].Subnet != "" {
			return n.IPAM.Config[0].Subnet, nil
		}
		if err == nil {
			err = errors.New("no subnet allocated yet")
		}
		if ctxutil.Sleep(ctx, 100*time.Millisecond) != nil {
			return "", fmt.Errorf("read its subnet: %w", err)
		}
	}
}

// relayNetwork is the network of the sandbox's relay beside the
// sandbox's own: an ordinary overlay (the nodes' route out, to the door),
// of this relay alone, removed with the sandbox. With reuse, one made by
// an earlier attempt is taken.
func (e *Engine) relayNetwork(ctx context.Context, sb sandbox, labels map[string]string, reuse bool) (string, error) {
	ids, err := e.relayNetworksOf(ctx, sb)
	if err != nil {
		return "", err
	}
	if len(ids) > 0 && reuse {
		return ids[0], nil
	}
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	l[contract.LabelSwarmObject] = objRelayNet
	name := objName(sb.svc, objRelayNet)
	if !reuse {
		// A gone network's name is still taken on the manager.
		name += fmt.Sprintf("-%x", time.Now().UnixNano()&0xffffffff)
	}
	resp, err := e.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "overlay", Labels: l})
	if err != nil {
		return "", fmt.Errorf("create the relay network %s of %s: %w (the swarm's address pool may be exhausted: remove unused networks)", name, sb.own.name, err)
	}
	return resp.ID, nil
}

// relayNetworksOf lists the networks of the sandbox's relay: those
// carrying its labels and named after its service.
func (e *Engine) relayNetworksOf(ctx context.Context, sb sandbox) ([]string, error) {
	f := sb.own.filter()
	f.Add("label", contract.LabelSwarmObject+"="+objRelayNet)
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list the relay networks of %s: %w", sb.own.name, err)
	}
	var out []string
	for _, n := range ns {
		if strings.HasPrefix(n.Name, objName(sb.svc, objRelayNet)) && sb.own.owns(n.Labels) {
			out = append(out, n.ID)
		}
	}
	return out, nil
}

// removeRelay removes the sandbox's relay service, when it is the
// sandbox's, and waits (up to removeWindow) until the cluster deleted its
// tasks: until then they hold the networks, which are removed next.
func (e *Engine) removeRelay(ctx context.Context, sb sandbox) error {
	s, _, err := e.cli.ServiceInspectWithRaw(ctx, relayName(sb.svc), swarm.ServiceInspectOptions{})
	if err == nil && !sb.own.owns(s.Spec.Labels) {
		return nil
	}
	var tasks []swarm.Task
	if err == nil {
		// Listed while the service exists: the daemon resolves a
		// service filter to a service, so once it is removed the list
		// fails (not found) however many of its tasks are left, and a
		// wait on it ran to its window. A failed list waits for none:
		// the networks' removal is retried all the same.
		tasks, err = e.cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", s.ID))})
		if err != nil {
			e.log.Debug("the relay's tasks could not be listed; its removal does not wait for them", "service", sb.svc, "err", err)
		}
		err = e.cli.ServiceRemove(ctx, s.ID)
	}
	if err != nil && !errdefs.IsNotFound(err) && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("remove the relay of %s: %w", sb.own.name, err)
	}
	if err != nil {
		return nil
	}
	e.waitTasksGone(ctx, sb, tasks)
	return nil
}

// waitTasksGone waits (up to removeWindow) until the cluster deleted the
// given tasks of a removed service. A task a restart made after they were
// listed is not waited for: it fails the network's removal, which is
// retried. Nor is one the window ends on: that removal says so. Nor is
// one on a node that is down: the cluster deletes it only once its node
// is back, and its desired state no longer holds the networks.
func (e *Engine) waitTasksGone(ctx context.Context, sb sandbox, tasks []swarm.Task) {
	ctx, cancel := context.WithTimeout(ctx, removeWindow)
	defer cancel()
	for _, t := range tasks {
		if down, why := e.nodeDown(ctx, t.NodeID); t.NodeID != "" && down {
			e.log.Warn("not waiting for the relay's task on a lost node: the cluster deletes it once the node is back",
				"container", sb.own.name, "node", e.nodeName(ctx, t.NodeID), "nodeState", why, "task", t.ID)
			continue
		}
		for {
			_, _, err := e.cli.TaskInspectWithRaw(ctx, t.ID)
			if isNotFound(err) || ctxutil.Sleep(ctx, 250*time.Millisecond) != nil {
				break
			}
		}
	}
}
