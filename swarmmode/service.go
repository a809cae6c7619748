package swarmmode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// WriteStdin delivers the task-request: the line becomes a config mounted
// read-only at the path contract.EnvTaskRequestFile names, and the service is
// created, which starts its one task. A sandbox whose service exists
// already has its request (the runner reads only the first one, as from
// stdin) and nothing is done.
func (e *Engine) WriteStdin(ctx context.Context, id string, line []byte) error {
	sb, err := e.serviceOf(ctx, id)
	if err != nil {
		return fmt.Errorf("deliver the task-request: %w", err)
	}
	svc := sb.svc
	if _, _, err := e.cli.ServiceInspectWithRaw(ctx, svc, swarm.ServiceInspectOptions{}); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("deliver the task-request to %s: %w", svc, err)
	}
	st, _, err := e.spec(ctx, sb)
	if err != nil {
		return fmt.Errorf("deliver the task-request: %w", err)
	}
	if stopped, err := e.stoppedBeforeDelivery(ctx, sb); err != nil || stopped {
		if err == nil {
			err = errors.New(StoppedBeforeDelivery)
		}
		return fmt.Errorf("deliver the task-request to %s: %w", svc, err)
	}
	objLabels := func(kind string) map[string]string {
		l := map[string]string{contract.LabelSwarmObject: kind, contract.LabelContainer: st.Name}
		for k, v := range st.Labels {
			l[k] = v
		}
		return l
	}
	reqName := objName(svc, objRequest)
	if err := e.storeRequest(ctx, sb, reqName, line, objLabels(objRequest)); err != nil {
		return fmt.Errorf("deliver the task-request to %s: %w", svc, err)
	}
	netID, err := e.sandboxNetwork(ctx, sb, st, objLabels, true)
	if err != nil {
		return err
	}
	spec, err := e.serviceSpec(ctx, svc, st, reqName, netID)
	if err != nil {
		return err
	}
	resp, err := e.cli.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil && strings.Contains(err.Error(), "network") && strings.Contains(err.Error(), "not found") {
		// A manager lists an overlay network it had a task on for a while
		// after the cluster deleted it (a sandbox of the same name removed
		// moments ago), and the listing cannot tell: the service then
		// names a network the cluster does not have. A new one is made.
		e.log.Debug("the sandbox's listed network is gone from the cluster; making a new one", "service", svc, "network", netID)
		if netID, err = e.sandboxNetwork(ctx, sb, st, objLabels, false); err != nil {
			return err
		}
		spec.TaskTemplate.Networks = []swarm.NetworkAttachmentConfig{{Target: netID}}
		resp, err = e.cli.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	}
	if errdefs.IsConflict(err) {
		return nil // a concurrent delivery won
	}
	if err != nil {
		return fmt.Errorf("create service %s: %w", svc, err)
	}
	if stopped, _ := e.stoppedBeforeDelivery(ctx, sb); stopped {
		// A stop came between the check above and the create: it found
		// no service to stop, so this one is stopped here.
		return errors.Join(fmt.Errorf("deliver the task-request to %s: %s", svc, StoppedBeforeDelivery), e.Stop(ctx, id, 0))
	}
	for _, w := range resp.Warnings {
		// "image ... could not be accessed on a registry": expected on a
		// cluster whose nodes had the image loaded.
		e.log.Debug("engine warning on service create", "service", svc, "warning", w)
	}
	return nil
}

// storeRequest keeps the task-request line as the Swarm config reqName
// (labelled labels) that the service's runner reads. One left by an
// earlier attempt that died before the service was created is kept when it
// holds this line and replaced when not; one that is not this sandbox's is
// refused.
func (e *Engine) storeRequest(ctx context.Context, sb sandbox, reqName string, line []byte, labels map[string]string) error {
	if _, err := e.cli.ConfigCreate(ctx, swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: reqName, Labels: labels},
		Data:        line,
	}); err == nil {
		return nil
	} else if !errdefs.IsConflict(err) {
		return fmt.Errorf("store it as a Swarm config: %w", err)
	}
	// The runner reads what the config holds, so it must be this line.
	cfg, _, ierr := e.cli.ConfigInspectWithRaw(ctx, reqName)
	if ierr == nil && !sb.own.owns(cfg.Spec.Labels) {
		return fmt.Errorf("config %s is not this sandbox's (labels %v); remove it by hand", reqName, cfg.Spec.Labels)
	}
	if ierr == nil && bytes.Equal(cfg.Spec.Data, line) {
		return nil
	}
	if ierr == nil {
		ierr = e.cli.ConfigRemove(ctx, cfg.ID)
	}
	if ierr == nil {
		_, ierr = e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: reqName, Labels: labels}, Data: line})
	}
	if ierr != nil {
		return fmt.Errorf("replace an earlier request config: %w", ierr)
	}
	return nil
}

// ensureNetwork returns the id of the sandbox's own overlay network: one per
// sandbox, so no two sandboxes share a network and reach each other. With
// reuse, one made by an earlier attempt is taken. An internal one has no
// route off it: the sandbox's relay is its way to the daemon.
func (e *Engine) ensureNetwork(ctx context.Context, sb sandbox, labels map[string]string, reuse, internal bool) (string, error) {
	netName := objName(sb.svc, "net")
	ids, err := e.networksOf(ctx, sb)
	if err != nil {
		return "", err
	}
	if len(ids) > 0 && reuse {
		return ids[0], nil
	}
	if !reuse {
		// The gone network's name is still taken on the manager.
		netName += fmt.Sprintf("-%x", time.Now().UnixNano()&0xffffffff)
	}
	resp, err := e.cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "overlay", Internal: internal, Labels: labels})
	if err != nil {
		return "", fmt.Errorf("create overlay network %s for %s: %w (the swarm's address pool may be exhausted: remove unused networks)", netName, sb.own.name, err)
	}
	return resp.ID, nil
}

// networksOf lists the sandbox's overlay networks: those carrying its
// labels and named after its service.
func (e *Engine) networksOf(ctx context.Context, sb sandbox) ([]string, error) {
	f := sb.own.filter()
	f.Add("driver", "overlay")
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list networks of %s: %w", sb.own.name, err)
	}
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		if strings.HasPrefix(n.Name, objName(sb.svc, "net")) && sb.own.owns(n.Labels) {
			out = append(out, n.ID)
		}
	}
	return out, nil
}

// SandboxResolver is the upstream DNS server of a confined sandbox: a
// loopback address, which the engine asks from the sandbox's own network
// namespace (libnetwork: a --dns 127.0.0.x "refers to the loopback in the
// container namespace"; only loopback servers of the node's own
// resolv.conf are asked from the node's), where nothing listens on it. It
// routes nowhere on any host: a packet to it never leaves the namespace
// it is sent in. An address that is merely meant to be unrouted is not:
// TEST-NET-1's 192.0.2.1, used before, was one machine's real default
// gateway. Not 127.0.0.1, where local resolvers and the runner's forwards
// listen, nor the engine's own resolver 127.0.0.11, nor systemd-resolved's
// 127.0.0.53 and 127.0.0.54. Engines since the fix for CVE-2024-29018
// ask no upstream at all for a container only on internal networks.
const SandboxResolver = "127.0.0.254"

// serviceSpec translates a stored spec into the service: replicated job of
// one task, no restart, the same labels on service and container, limits
// with a memory reservation (so the scheduler places by memory),
// capabilities dropped as on the single engine.
func (e *Engine) serviceSpec(ctx context.Context, svc string, st storedSpec, reqConfig, netID string) (swarm.ServiceSpec, error) {
	one := uint64(1)
	grace := e.opts.StopGrace
	cs := &swarm.ContainerSpec{
		Image:           st.Image,
		Labels:          st.Labels,
		Args:            st.Cmd,
		User:            st.User,
		Dir:             st.WorkingDir,
		ReadOnly:        st.ReadOnlyRootfs,
		StopGracePeriod: &grace,
		CapabilityDrop:  []string{"ALL"},
		CapabilityAdd:   engine.KeptCapabilities(),
		Env: []string{
			contract.EnvTaskRequestFile + "=" + requestPath,
			contract.EnvSecretEnv + "=" + strings.Join(st.EnvKeys, ","),
		},
	}
	if st.Relay != nil {
		cs.Env = append(cs.Env, contract.EnvNetRelay+"="+contract.NetRelayHost)
		// The engine's resolver still answers the overlay's own names (the
		// relay's); every other name goes to this upstream, in the
		// sandbox's own namespace, instead of the node's resolver: an
		// engine without the fix for CVE-2024-29018 would ask a loopback
		// resolver of the node's from the node's namespace, a way out for
		// names.
		cs.DNSConfig = &swarm.DNSConfig{Nameservers: []string{SandboxResolver}}
	}
	for _, h := range st.ExtraHosts {
		name, addr, _ := strings.Cut(h, ":")
		if addr == "host-gateway" {
			addr = e.opts.HostAddr
		}
		cs.Hosts = append(cs.Hosts, addr+" "+name)
	}
	if err := e.attachConfigs(ctx, cs, svc, st, reqConfig); err != nil {
		return swarm.ServiceSpec{}, err
	}
	user, err := e.imageUser(ctx, st)
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("create service %s: %w", svc, err)
	}
	if !isRoot(user) {
		// Root reads the secrets, then becomes the user: the files are
		// root's only, so the agent (that user) cannot read them.
		cs.User = "0"
		cs.Env = append(cs.Env, contract.EnvRunAs+"="+user)
	}
	for i, k := range st.EnvKeys {
		name := objName(svc, "env"+strconv.Itoa(i))
		s, _, err := e.cli.SecretInspectWithRaw(ctx, name)
		if err != nil {
			return swarm.ServiceSpec{}, fmt.Errorf("create service %s: secret for %s: %w", svc, k, err)
		}
		cs.Secrets = append(cs.Secrets, &swarm.SecretReference{SecretID: s.ID, SecretName: name,
			File: &swarm.SecretReferenceFileTarget{Name: k, UID: "0", GID: "0", Mode: 0o400}})
	}
	if st.ReadOnlyRootfs {
		cs.Mounts = append(cs.Mounts, mount.Mount{Type: mount.TypeTmpfs, Target: "/tmp", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 256 << 20}})
	}
	for _, p := range st.Scratch {
		cs.Mounts = append(cs.Mounts, mount.Mount{Type: mount.TypeVolume, Target: p})
	}
	res := &swarm.ResourceRequirements{Limits: &swarm.Limit{NanoCPUs: st.NanoCPUs, MemoryBytes: st.MemoryBytes, Pids: st.PidsLimit}}
	if st.MemoryBytes > 0 {
		res.Reservations = &swarm.Resources{MemoryBytes: st.MemoryBytes}
	}
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: svc, Labels: withContainer(st.Labels, st.Name)},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: cs,
			Resources:     res,
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: netID}},
			LogDriver:     &swarm.Driver{Name: "json-file", Options: map[string]string{"max-size": logMaxSize, "max-file": logMaxFile}},
		},
		Mode: swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: &one, TotalCompletions: &one}},
	}, nil
}

// attachConfigs gives the service's container the task-request config
// and the spec's files, root's and read-only.
func (e *Engine) attachConfigs(ctx context.Context, cs *swarm.ContainerSpec, svc string, st storedSpec, reqConfig string) error {
	cfgRef := func(id, name, target string) *swarm.ConfigReference {
		return &swarm.ConfigReference{ConfigID: id, ConfigName: name, File: &swarm.ConfigReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o444}}
	}
	req, _, err := e.cli.ConfigInspectWithRaw(ctx, reqConfig)
	if err != nil {
		return fmt.Errorf("create service %s: %w", svc, err)
	}
	cs.Configs = append(cs.Configs, cfgRef(req.ID, reqConfig, requestPath))
	for _, f := range st.Files {
		c, _, err := e.cli.ConfigInspectWithRaw(ctx, f.Config)
		if err != nil {
			return fmt.Errorf("create service %s: file for %s: %w", svc, f.Target, err)
		}
		cs.Configs = append(cs.Configs, cfgRef(c.ID, f.Config, f.Target))
	}
	return nil
}

func withContainer(labels map[string]string, name string) map[string]string {
	out := map[string]string{contract.LabelContainer: name}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// EnsureNetwork has no shared network to make: every sandbox gets its own
// overlay network when its service is created. The gateway reported is
// Options.HostAddr, where tasks reach the daemon's machine.
func (e *Engine) EnsureNetwork(ctx context.Context, name string, labels map[string]string) (engine.NetworkInfo, error) {
	return engine.NetworkInfo{Name: name, Gateway: e.opts.HostAddr}, nil
}

// RemoveNetworkIfUnused has nothing to remove: a sandbox's network goes
// with the sandbox (Remove).
func (e *Engine) RemoveNetworkIfUnused(ctx context.Context, name string) error { return nil }

// imageUser is the user the sandbox's process is to run as: the spec's,
// else the image's as the manager has it. An image the manager does not
// have is an error: running it as root, or handing the secrets to an
// unknown user, is not an option.
func (e *Engine) imageUser(ctx context.Context, st storedSpec) (string, error) {
	if st.User != "" {
		return st.User, nil
	}
	img, err := e.cli.ImageInspect(ctx, st.Image)
	if err != nil {
		return "", fmt.Errorf("read which user image %s runs as on the manager: %w (the secret files are kept from that user: pull or load the image on the manager node too)", st.Image, err)
	}
	if img.Config == nil {
		return "", nil
	}
	return img.Config.User, nil
}

// isRoot reports whether an image's USER is root.
func isRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "" || u == "0" || u == "root"
}
