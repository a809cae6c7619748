package container

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// testSealed: a sealed sandbox of a Docker with a hosts file starts with
// networking disabled (no engine network setup), finds localhost and its
// own loopback listener, and reaches nothing else; without the hosts file
// the same spec gets the engine's usual setup.
func (e *rig) testSealed(t *testing.T) {
	ctx := testCtx(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	d := newDocker(e.cli, WithLogger(e.d.log), WithSealedHosts(hosts))
	if err := d.prepareSealed(ctx); err != nil {
		t.Fatal(err)
	}
	// Something on the host to fail to reach: a listener on every
	// address, dialled at the engine's bridge gateway.
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	outside := net.JoinHostPort(e.gateway(t), port)

	s := e.spec("sealed", "listen:8080;connect:localhost:8080;connect:"+outside+";exit:0")
	s.Network, s.Sealed = engine.NetworkNone, true
	id, err := d.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.d.Remove(testCtx(t), id) })
	in, err := e.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Config.NetworkDisabled || !slices.ContainsFunc(in.Mounts, func(m container.MountPoint) bool { return m.Destination == hostsMountTarget && !m.RW }) {
		t.Fatalf("sealed sandbox: networking disabled %v, mounts %+v; want disabled and %s read-only", in.Config.NetworkDisabled, in.Mounts, hostsMountTarget)
	}
	exit := d.Wait(ctx, id)
	lines, err := d.Lines(ctx, id, logcursor.Position{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	got := texts(drain(t, lines))
	waitExit(t, exit)
	if len(got) != 3 || got[1] != "connect ok" || !strings.HasPrefix(got[2], "connect failed") {
		t.Fatalf("sealed sandbox: %q, want its listener, localhost reached, %s not", got, outside)
	}
	if b, err := os.ReadFile(hosts); err != nil || string(b) != loopbackHosts {
		t.Fatalf("hosts file: %q (%v)", b, err)
	}

	// Without a hosts file, or on an engine whose default runtime is not
	// runc (which leaves a new namespace's loopback down), Sealed changes
	// nothing.
	other := newDocker(e.cli, WithLogger(e.d.log), WithSealedHosts(hosts))
	other.defaultRuntime = "runsc"
	for what, d := range map[string]*Docker{"without a hosts file": e.d, "with another default runtime": other} {
		s.Name = e.spec("sealed-plain", "exit:0").Name + "-" + strings.ReplaceAll(what, " ", "-")
		id, err := d.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.d.Remove(testCtx(t), id) })
		in, err := e.cli.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if in.Config.NetworkDisabled {
			t.Errorf("sealed spec on a Docker %s: networking disabled, want the engine's setup", what)
		}
	}
}

// gateway is the address of the host on the rig's network.
func (e *rig) gateway(t *testing.T) string {
	t.Helper()
	n, err := e.cli.NetworkInspect(testCtx(t), e.net, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 || n.IPAM.Config[0].Gateway == "" {
		t.Fatalf("network %s: no gateway (%v)", e.net, err)
	}
	return n.IPAM.Config[0].Gateway
}
