package orchestrator

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// serviceAddr is where the daemon's services listen for sandboxes without
// a network: the host's loopback, reached through each container's own
// sockets (package egress), never through an address the sandbox holds.
const serviceAddr = "127.0.0.1"

// SandboxNet gives containers no network and the daemon's services as
// unix sockets in a directory of their own (package egress), or on a
// cluster through a relay of their own to the daemon's door. With it set,
// containers run with no network but that; nil keeps them on the swarm's
// network (a warm pool).
type SandboxNet interface {
	// Open serves sb's sockets (again, after a daemon restart) and says
	// what the container gets; calling it for an open sandbox is cheap.
	Open(ctx context.Context, sb NetSandbox) (NetGrant, error)
	// Close stops serving a finished container; what the engine needs to
	// read the stopped container (its mount's source) stays.
	Close(sb contract.Sandbox)
	// Forget releases all of a container the engine removed; dir is
	// NetSandbox.Dir, where its sockets were served when not its own (a
	// restarted daemon may never have served them).
	Forget(sb contract.Sandbox, dir string)
}

// NetSandbox is one container as SandboxNet sees it.
type NetSandbox struct {
	SwarmID, Container, Repo string
	// RepoURL is the origin a remote-mode container clones from ("" in
	// local mode): its host is allowed through the proxy.
	RepoURL string
	// Deny journals one refused request.
	Deny func(method, host string, port int, reason string)
	// Dir is where to serve the sockets when the container has a
	// directory mounted at contract.NetDir already (a claimed warm
	// sandbox: the pool mounted one of its own at the sandbox's create);
	// "" for the container's own, which Open makes.
	Dir string
}

// NetGrant is what Open gives the container.
type NetGrant struct {
	Dir string   // host directory mounted at contract.NetDir ("" on a cluster)
	Env []string // KEY=VALUE: the forwards and the proxy variables
	// Relay is a cluster sandbox's way to the daemon's door (Dir "").
	Relay *engine.Relay
}

// openNet serves c's sockets; nil without a SandboxNet.
func (sw *swarm) openNet(ctx context.Context, c *ctr) (*NetGrant, error) {
	if sw.m.cfg.Net == nil {
		return nil, nil
	}
	sw.mu.Lock()
	name, repoURL, warm := c.name, "", c.warm
	if !sw.local {
		repoURL = c.repoURL
	}
	sw.mu.Unlock()
	dir := ""
	if warm && sw.m.cfg.Warm != nil {
		if dir = sw.m.cfg.Warm.SocketDir(sw.idOf(c)); dir == "" {
			return nil, fmt.Errorf("open the daemon's services to %s: a claimed warm sandbox without the pool's socket directory (drain the pool: aimid --drain-pool)", name)
		}
	}
	ng, err := sw.m.cfg.Net.Open(ctx, NetSandbox{
		SwarmID: sw.id, Container: name, Repo: sw.repo, RepoURL: repoURL, Dir: dir,
		Deny: func(method, host string, port int, reason string) { sw.noteDenied(name, method, host, port, reason) },
	})
	if err != nil {
		return nil, fmt.Errorf("open the daemon's services to %s: %w", name, err)
	}
	return &ng, nil
}

// closeNet stops serving c's sockets.
func (sw *swarm) closeNet(c *ctr) {
	if sw.m.cfg.Net != nil {
		sw.m.cfg.Net.Close(sw.sandbox(c))
	}
}

// forgetNet releases what remained of the sandbox of container sb once
// the engine removed it; dir is netDirOf before the removal.
func (m *Manager) forgetNet(sb contract.Sandbox, dir string) {
	if m.cfg.Net != nil && sb.Swarm != "" && sb.Container != "" {
		m.cfg.Net.Forget(sb, dir)
	}
}

// netDirOf is the socket directory the warm pool mounted in claimed
// container id ("" for any other): asked before the engine removes the
// container, which ends its claim.
func (m *Manager) netDirOf(id string) string {
	if m.cfg.Net == nil || m.cfg.Warm == nil || id == "" {
		return ""
	}
	return m.cfg.Warm.SocketDir(id)
}

// noteDenied journals a refused egress request as a daemon record and
// counts it (noteRefusal).
func (sw *swarm) noteDenied(name, method, host string, port int, reason string) {
	target := host + ":" + strconv.Itoa(port)
	rec := state.Record{Stream: state.StreamDaemon, Type: state.TypeEgressDenied, Reason: method + " " + target + ": " + reason}
	sw.noteRefusal(name, rec, func(c *ctr) { c.egressDenied++ })
}

// noteRefusal journals rec, a daemon record of a refusal of container
// name, and then counts it (count, under sw.mu). Only a journaled refusal
// is counted: Recover rebuilds the counts from the journal, so a restart
// shows the count it showed before.
func (sw *swarm) noteRefusal(name string, rec state.Record, count func(*ctr)) {
	if err := sw.led.note(sw.m.life, name, rec); err != nil {
		sw.m.log.Warn("journal a refusal", "type", rec.Type, "swarm", sw.id, "container", name, "err", err)
		return
	}
	if c := sw.find(name); c != nil {
		sw.mu.Lock()
		count(c)
		sw.mu.Unlock()
	}
}

// applyNet puts c's network settings into its spec: no network, its
// socket directory, the forwards.
func applyNet(s *engine.Spec, ng *NetGrant) {
	if ng == nil {
		return
	}
	s.Network = engine.NetworkNone
	// On one engine it stays there (its sockets are its way out); a
	// cluster's relay puts it on an overlay of its own instead.
	s.Sealed = ng.Relay == nil
	if ng.Dir != "" {
		s.Mounts = append(s.Mounts, engine.Mount{Source: ng.Dir, Target: contract.NetDir})
	}
	s.Env = append(s.Env, ng.Env...)
	s.Relay = ng.Relay
}

// modelGateway is the address a model grant names: none for containers
// without a network (their runner serves the gateway on its loopback,
// forwarding to their own socket), else the swarm network's gateway.
func (sw *swarm) modelGateway() string {
	if sw.m.cfg.Net != nil {
		return ""
	}
	return sw.gatewayIP()
}
