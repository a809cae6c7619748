package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/swarmmode"
)

// TestSwarmBackendSandboxReachesNothingButTheDaemonsServices is the
// single engine's TestSandboxReachesNothingButTheDaemonsServicesAndTheAllowlist
// on the Swarm mode cluster: three probes run as sandboxes spread over the
// nodes and try every way out: a service of the test machine listening on
// every interface (at git.address, where the daemon's door is, and the
// machine's other addresses, TCP and UDP), the door itself, each node's
// address at its Swarm port (a service of the node), a container on
// another network, and a stand-in for everything beyond the nodes (a
// container on the nodes' own network, at the ports of the web, DNS and
// the metadata service, by TCP, UDP and by its name, which the nodes
// resolve): every target is on this machine. None answers; each probe's
// branch comes back through the git service, an address egress.allow
// names answers through the proxy, and a host no rule names is refused
// and journaled as egress-denied, on every node. Each sandbox's resolver
// is the engine's own in its namespace, whose only upstream is a loopback
// address of that namespace, and it has no default route.
func TestSwarmBackendSandboxReachesNothingButTheDaemonsServices(t *testing.T) {
	parallelCluster(t)
	image := sandboxImage(t)
	c := testCluster(t, image)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var tcpHits, udpHits atomic.Int64
	hostPort, udpPort := hostListeners(t, &tcpHits, &udpHits)
	allowed := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "allowed") })}
	allowedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = allowed.Serve(allowedLn) }()
	defer allowed.Close()

	dir := shortDir(t)
	sock, dataDir := filepath.Join(dir, "aimid.sock"), filepath.Join(dir, "data")
	config := "agent:\n  kind: exec\n  command: " + sandboxNetCommand + "; HOSTPORT=" + strconv.Itoa(hostPort) + " perl probe.pl\ngit:\n  mode: local\negress:\n  allow:\n    - \"" + allowedLn.Addr().String() + "\"\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  dataDir,
		Config:   config,
		LogLevel: "debug",
		Base:     cleanEnv(),
		Env:      swarmSettings(c, image),
	})
	defer p.stop(t)
	door, err := os.ReadFile(filepath.Join(dataDir, "net", "door.port"))
	if err != nil {
		t.Fatalf("the daemon keeps no door port: %v", err)
	}

	w := startWorld(t, ctx, c, image)
	targets := swarmEgressTargets(t, ctx, c, image, w, strings.TrimSpace(string(door)), hostPort, udpPort, allowedLn.Addr().String())
	repo, branches := swarmProbeRepo(t, targets, 3)
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, 6*time.Minute, "every probe exited", func(v api.SwarmView) bool {
		return len(v.Containers) == len(branches) && allExited(v)
	})
	checkSandboxResolver(t, ctx, c, validState(t, repo).SwarmID, len(branches))
	nodes := map[string]bool{}
	for _, d := range view.Containers {
		nodes[d.Node] = true
		if d.Status != "completed" {
			t.Errorf("%s on %s: %s %+v", d.Name, d.Node, d.Status, d.Errors)
		}
	}
	if len(nodes) < 2 {
		t.Errorf("the probes ran on %d node(s) %v, want at least 2", len(nodes), nodes)
	}
	for _, b := range branches {
		if !t.Run(b, func(t *testing.T) { waitBranch(t, repo, b, 2*time.Minute) }) {
			continue
		}
		checkProbe(t, b, gittest.Git(t, repo, "show", b+":probe-out.txt"))
		checkSandboxNet(t, b, func(f string) string { return gittest.Git(t, repo, "show", b+":"+f) })
	}
	if hits := w.hits(t, ctx); len(hits) != 0 {
		t.Errorf("the stand-in for the world off the sandboxes' network (%s) got: %s", w.name, strings.Join(hits, "; "))
	}
	if n, m := tcpHits.Load(), udpHits.Load(); n != 0 || m != 0 {
		t.Errorf("the test machine's service got %d TCP connections and %d UDP packets from the sandboxes", n, m)
	}
	for _, d := range view.Containers {
		code, logs, errOut := aimi(ctx, "swarm", "logs", d.Name, "--repo", repo, "--socket", sock)
		if code != 0 || !strings.Contains(logs, "egress-denied") || !strings.Contains(logs, "GET denied.example:80") {
			t.Errorf("%s (node %s): the refusal is not in the journal: exit %d\n%s\n%s", d.Name, d.Node, code, logs, errOut)
		}
	}
	eng, err := swarmmode.New(ctx, c.Manager().Client, swarmmode.Options{Instance: testInstance(sock), NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range view.Containers {
		if err := eng.Remove(ctx, d.ContainerID); err != nil {
			t.Errorf("remove %s: %v", d.Name, err)
		}
	}
}

// swarmEgressTargets are the probes' targets: the daemon's door on the
// cluster's gateway, the host's services on each of its addresses, every
// node's swarm ports, a container on another network, the stand-in for
// the world beyond the nodes (w: its web, DNS and metadata ports, and its
// name, which every node resolves), and through the proxy the allowed
// service and a host no rule names.
func swarmEgressTargets(t *testing.T, ctx context.Context, c *clustertest.Cluster, image string, w *world, door string, hostPort, udpPort int, allowed string) []string {
	t.Helper()
	targets := []string{fmt.Sprintf("tcp %s %s", c.Gateway, door)}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil && !ip.IsLoopback() {
			targets = append(targets, fmt.Sprintf("tcp %s %d", ip, hostPort), fmt.Sprintf("udp %s %d", ip, udpPort))
		}
	}
	for _, n := range c.Nodes {
		targets = append(targets, "tcp "+n.Addr+" 2377", "tcp "+n.Addr+" 7946")
	}
	targets = append(targets,
		fmt.Sprintf("tcp %s 8080", otherNetworkContainer(t, ctx, image)),
		// The world off the sandboxes' network, on this machine: every
		// node reaches it, and resolves its name.
		"tcp "+w.addr+" 80", "tcp "+w.addr+" 443", "tcp "+w.addr+" 53", "udp "+w.addr+" 53", "dns "+w.name,
		"proxy http://"+allowed+"/ok",
		"proxy http://denied.example/",
	)
	return targets
}

// checkProbe fails t for every way out the probe of branch found open, and
// unless the proxy answered the allowed address and refused the other.
func checkProbe(t *testing.T, branch, out string) {
	t.Helper()
	t.Logf("%s:\n%s", branch, out)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "OPEN") {
			t.Errorf("%s: the sandbox got out: %s", branch, line)
		}
	}
	if !strings.Contains(out, "/ok -> HTTP/1.1 200") && !strings.Contains(out, "/ok -> HTTP/1.0 200") {
		t.Errorf("%s: the allowed address through the proxy did not answer 200", branch)
	}
	if !strings.Contains(out, "denied.example/ -> HTTP/1.1 403") && !strings.Contains(out, "denied.example/ -> HTTP/1.0 403") {
		t.Errorf("%s: the host no rule names was not refused with 403", branch)
	}
}

// hostListeners listens on every interface, TCP and UDP, counting what
// arrives, until t ends.
func hostListeners(t *testing.T, tcpHits, udpHits *atomic.Int64) (tcpPort, udpPort int) {
	t.Helper()
	tcpLn, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcpLn.Close() })
	go func() {
		for {
			c, err := tcpLn.Accept()
			if err != nil {
				return
			}
			tcpHits.Add(1)
			_ = c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			udpHits.Add(1)
		}
	}()
	return tcpLn.Addr().(*net.TCPAddr).Port, udp.LocalAddr().(*net.UDPAddr).Port
}

// swarmProbeRepo is a repository with n task files, each a probe's branch
// (named after the repository: the cluster is shared), the probe script
// and its targets.
func swarmProbeRepo(t *testing.T, targets []string, n int) (string, []string) {
	t.Helper()
	repo := shortDir(t)
	if err := os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	files := map[string][]byte{"probe.pl": []byte(probeScript), "targets.txt": []byte(strings.Join(targets, "\n") + "\n")}
	var branches []string
	for i := range n {
		b := fmt.Sprintf("feat/probe%d-%s", i, sfx)
		branches = append(branches, b)
		files[fmt.Sprintf(".aimi/tasks/probe%d-%s-tasks.json", i, sfx)] = taskFileJSON(b, 1)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "probe"}} {
		gittest.Git(t, repo, args...)
	}
	removeProjectContainersAtEnd(t, repo)
	return repo, branches
}

// checkSandboxResolver: every sandbox service of the swarm sends names its
// overlay does not know to the upstream swarmmode gives it (a loopback
// address of the sandbox's own namespace: checkSandboxNet), never to the
// node's resolver.
func checkSandboxResolver(t *testing.T, ctx context.Context, c *clustertest.Cluster, swarmID string, want int) {
	t.Helper()
	svcs, err := c.Manager().Client.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("label", contract.LabelSwarmID+"="+swarmID))})
	if err != nil {
		t.Fatalf("services of the swarm: %v", err)
	}
	sandboxes := 0
	for _, s := range svcs {
		cs := s.Spec.TaskTemplate.ContainerSpec
		if cs == nil || !slices.ContainsFunc(cs.Env, func(kv string) bool { return strings.HasPrefix(kv, contract.EnvNetRelay+"=") }) {
			continue // a relay: it dials the door by address
		}
		sandboxes++
		if cs.DNSConfig == nil || !slices.Equal(cs.DNSConfig.Nameservers, []string{swarmmode.SandboxResolver}) {
			t.Errorf("sandbox service %s resolves outside names through %+v, want only %s", s.Spec.Name, cs.DNSConfig, swarmmode.SandboxResolver)
		}
	}
	if sandboxes != want {
		t.Errorf("%d sandbox services of the swarm, want %d", sandboxes, want)
	}
}
