package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/swarmmode"
)

// sandboxNetCommand keeps, in the workspace (so on the probe's branch), the
// sandbox's resolver configuration and its IPv4 routes: the main table and
// the kernel's whole routing trie, as its network namespace has them.
const sandboxNetCommand = "cat /etc/resolv.conf > net-resolv.txt; cat /proc/net/route > net-route.txt; cat /proc/net/fib_trie > net-fib.txt"

// engineResolver is the engine's own resolver inside every container on a
// user-defined or overlay network.
const engineResolver = "127.0.0.11"

// checkSandboxNet checks what sandboxNetCommand kept of a sandbox: its one
// resolver is the engine's, in its own namespace; the engine's upstream
// for names the overlay does not know (the service's) is a loopback
// address, which the namespace routes to its own lo; and nothing routes
// off the overlay (no default route).
func checkSandboxNet(t *testing.T, branch string, show func(file string) string) {
	t.Helper()
	var ns []string
	for _, line := range strings.Split(show("net-resolv.txt"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	if len(ns) != 1 || ns[0] != engineResolver {
		t.Errorf("%s: the sandbox's resolv.conf names %v, want only the engine's resolver %s", branch, ns, engineResolver)
	}
	up := net.ParseIP(swarmmode.SandboxResolver)
	if up == nil || !up.IsLoopback() || swarmmode.SandboxResolver == engineResolver {
		t.Errorf("%s: the sandbox's upstream resolver %s is not a loopback address of its own (other than the engine's resolver)", branch, swarmmode.SandboxResolver)
	}
	fib := show("net-fib.txt")
	if !strings.Contains(fib, "|-- 127.0.0.0\n") || !strings.Contains(fib, "/8 host LOCAL") {
		t.Errorf("%s: the sandbox's routing trie has no local route for 127.0.0.0/8:\n%s", branch, fib)
	}
	sc := bufio.NewScanner(strings.NewReader(show("net-route.txt")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] == "Iface" {
			continue
		}
		if f[1] == "00000000" {
			t.Errorf("%s: the sandbox has a default route: %s", branch, sc.Text())
		}
	}
}

// world stands in for everything beyond the nodes, on this machine: a
// container on the cluster's own network (every node reaches it, and
// resolves its name) listening where the internet's web, DNS and the
// metadata service would answer, and saying what reached it.
type world struct {
	name, addr, id string
	cli            *client.Client
}

// worldScript listens on TCP 80, 443 and 53 and UDP 53, printing a HIT line
// for each connection or datagram.
const worldScript = `use IO::Socket::INET; use IO::Select; $| = 1;
my $s = IO::Select->new;
for my $p (80, 443, 53) { $s->add(IO::Socket::INET->new(LocalPort => $p, Listen => 5, ReuseAddr => 1, Proto => 'tcp') or die "tcp $p: $!") }
my $u = IO::Socket::INET->new(LocalPort => 53, Proto => 'udp') or die "udp 53: $!"; $s->add($u);
print "ready\n";
while (1) { for my $h ($s->can_read) { if ($h == $u) { my $b; $h->recv($b, 512); print "HIT udp 53\n" } else { my $c = $h->accept; print "HIT tcp ", $h->sockport, "\n"; close $c if $c } } }
`

// startWorld runs the world on the cluster's network, removed when t ends.
func startWorld(t *testing.T, ctx context.Context, c *clustertest.Cluster, image string) *world {
	t.Helper()
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	name := fmt.Sprintf("aimi-world-%s-%x", run[:8], sha256.Sum256([]byte(t.Name())))[:32]
	cr, err := cli.ContainerCreate(ctx, &container.Config{
		Image: image, User: "0", Entrypoint: []string{"perl", "-e", worldScript},
		Labels: map[string]string{dockertest.LabelKey: run},
	}, &container.HostConfig{NetworkMode: container.NetworkMode(c.Network)}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, cr.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &world{name: name, id: cr.ID, cli: cli}
	in, err := cli.ContainerInspect(ctx, cr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ep := in.NetworkSettings.Networks[c.Network]; ep != nil {
		w.addr = ep.IPAddress
	}
	testwait.Eventually(t, time.Minute, "the world stand-in to listen", func() error {
		logs := w.logs(t, ctx)
		if strings.Contains(logs, "ready\n") {
			return nil
		}
		if w.addr == "" {
			t.Fatalf("the world stand-in has no address on %s:\n%s", c.Network, logs)
		}
		return fmt.Errorf("address %q, its log:\n%s", w.addr, logs)
	})
	return w
}

// logs is what the world printed so far.
func (w *world) logs(t *testing.T, ctx context.Context) string {
	t.Helper()
	rc, err := w.cli.ContainerLogs(ctx, w.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// hits are the connections and datagrams that reached the world.
func (w *world) hits(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(w.logs(t, ctx), "\n") {
		if strings.HasPrefix(line, "HIT") || strings.Contains(line, " at -e line") {
			out = append(out, line)
		}
	}
	return out
}
