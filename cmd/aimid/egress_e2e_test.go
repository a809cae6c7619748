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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/nstest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// probeScript runs in the sandbox as the exec agent (the image has perl,
// not curl): it tries every way out named in targets.txt ("tcp ADDR PORT",
// "udp ADDR PORT", "proxy URL", "dns NAME": only for a name of a test's
// own stand-in) and writes one line per try to
// probe-out.txt, which the runner commits and pushes. "routes" writes the
// sandbox's routes but the loopback's ("ROUTE ...", a default route
// "OPEN default route ...") and its resolvers ("resolver ADDR"): the probe
// asks no resolver, since one it had a route to would be off this
// machine.
const probeScript = `use strict; use IO::Socket::INET; use Socket;
open(my $out, '>', 'probe-out.txt') or die; select($out); $| = 1;
my @gw;
if (open(my $r, '<', '/proc/net/route')) { while (<$r>) { my @f = split; if ($f[1] eq '00000000' && $f[2] ne '00000000') { push @gw, join('.', reverse map { hex } unpack('(A2)4', $f[2])); } } }
open(my $t, '<', 'targets.txt') or die;
my @targets = <$t>; push @targets, map { "tcp $_ HOSTPORT\n" } @gw;
for (@targets) {
	chomp; my ($kind, $a, $p) = split;
	if ($kind eq 'tcp') {
		$p = $ENV{HOSTPORT} if $p eq 'HOSTPORT';
		my $c = IO::Socket::INET->new(PeerAddr => $a, PeerPort => $p, Proto => 'tcp', Timeout => 5);
		print $c ? "OPEN tcp $a:$p\n" : "closed tcp $a:$p ($@)\n";
	} elsif ($kind eq 'udp') {
		my $c = IO::Socket::INET->new(PeerAddr => $a, PeerPort => $p, Proto => 'udp');
		my $sent = $c && $c->send("aimi-probe");
		print $sent ? "OPEN udp $a:$p sent\n" : "closed udp $a:$p ($!)\n";
	} elsif ($kind eq 'routes') {
		for my $f ('/proc/net/route', '/proc/net/ipv6_route') {
			open(my $r, '<', $f) or do { print "closed routes $f ($!)\n"; next };
			while (<$r>) {
				my @f = split; next if $f[0] eq 'Iface';
				my ($if, $dst) = $f =~ /ipv6/ ? ($f[-1], $f[0] . '/' . $f[1]) : ($f[0], $f[1] . '/' . $f[7]);
				next if $if eq 'lo';
				print $dst =~ /^0+\/0+$/ ? "OPEN default route $f: $_" : "ROUTE $f: $_";
			}
		}
		if (open(my $r, '<', '/etc/resolv.conf')) { while (<$r>) { print "resolver $1\n" if /^\s*nameserver\s+(\S+)/; } }
		print "routes read\n";
	} elsif ($kind eq 'dns') {
		my @addrs = gethostbyname($a);
		print @addrs ? "OPEN dns $a\n" : "closed dns $a\n";
	} elsif ($kind eq 'proxy') {
		my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => 3128, Proto => 'tcp', Timeout => 5);
		if (!$c) { print "closed proxy $a (no proxy: $@)\n"; next; }
		print $c "GET $a HTTP/1.0\r\n\r\n"; my $status = <$c>; $status =~ s/\r?\n//;
		print "proxy $a -> $status\n";
	}
}
`

// TestSandboxReachesNothingButTheDaemonsServicesAndTheAllowlist: a host
// service listens on every interface (TCP and UDP), a container runs on
// another network, a test host in a network namespace stands in for the
// outside (HTTPS, a resolver's port, a link-local address for the
// metadata service: a container with a network reaches it), and the
// sandbox's agent tries each way out: the host's addresses (the engine's
// bridge gateways among them), its own default gateway, the other
// container, the outside by TCP and UDP; it has no route but the
// loopback's, so no resolver it names is reached either. None answers;
// the git service still does (the branch comes back), a local HTTP server
// named by an explicit egress.allow address answers through the proxy,
// and a host no rule names is refused and journaled as egress-denied.
func TestSandboxReachesNothingButTheDaemonsServicesAndTheAllowlist(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	probeEgress(t, false)
}

// TestClaimedSandboxReachesNothingButTheDaemonsServicesAndTheAllowlist is
// the test above with a warm pool of one: before its claim the waiting
// sandbox runs the same probe (every way out, the proxy's port included)
// and reaches nothing, its socket directory empty; the claimed sandbox
// then reaches exactly what a created one does (the git service, the
// allowed host through the proxy, nothing else).
func TestClaimedSandboxReachesNothingButTheDaemonsServicesAndTheAllowlist(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	probeEgress(t, true)
}

// probeEgress runs the probe in a sandbox of a start: a created one, or
// with warm a claimed one (probed once before its claim too).
func probeEgress(t *testing.T, warm bool) {
	image := sandboxImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	h := listenOnTheHost(t)
	hostPort, allowedLn := h.hostPort, h.allowedLn

	other, otherID := otherNetwork(t, ctx, image)
	reachedWithARoute(t, ctx, otherID, h)
	targets := egressTargets(h, other)

	repo := egressRepo(t, targets)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	config := "agent:\n  kind: exec\n  command: HOSTPORT=" + strconv.Itoa(hostPort) + " perl probe.pl\ngit:\n  mode: local\negress:\n  allow:\n    - \"" + allowedLn.Addr().String() + "\"\n"
	settings := []string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m", "AIMI_SWARM_STOP_GRACE=2s"}
	if warm {
		settings = append(settings, "AIMI_SANDBOX_WARM_POOL=1")
		dockertest.Cleanup(t, contract.LabelDaemon, testInstance(sock))
	}
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Config: config, LogLevel: "debug", Base: env, Env: settings})
	defer p.stop(t)
	if warm {
		cli := dockertest.Client(t)
		pool := waitPool(t, ctx, cli, testInstance(sock), 1, p)
		probeWaiting(t, ctx, cli, pool[0], targets, hostPort)
	}
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitBranch(t, repo, "feat/probe", 5*time.Minute)
	out := gittest.Git(t, repo, "show", "feat/probe:probe-out.txt")
	t.Logf("probe:\n%s", out)
	checkSealedProbe(t, "feat/probe", out, h)
	sw := validState(t, repo)
	name := sw.Containers[0].ContainerName
	if warm && !hasWarmNote(t, repo, sw.SwarmID, name) {
		t.Errorf("%s was created, not claimed from the pool", name)
	}
	code, logs, errOut := aimi(ctx, "swarm", "logs", name, "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(logs, "egress-denied") || !strings.Contains(logs, "GET denied.example:80") {
		t.Errorf("the refusal is not in the journal: exit %d\n%s\n%s", code, logs, errOut)
	}
	if code, st, errOut := aimi(ctx, "swarm", "status", "--repo", repo, "--socket", sock); code != 0 || !strings.Contains(st, "Egress refused") || !strings.Contains(st, name) {
		t.Errorf("status has no count of the refusals: exit %d\n%s\n%s", code, st, errOut)
	}
}

// egressHost is what the sandbox must not reach on the host and outside,
// counting what does, and the one service the egress rules allow.
type egressHost struct {
	tcpHits, udpHits  *atomic.Int64
	hostPort, udpPort int
	allowedLn         net.Listener
	// outside is a test host standing in for the internet and the
	// metadata service (its link-local address), listening on 443 (TCP)
	// and 53 (UDP); outHits counts what reaches it.
	outside *nstest.Host
	outHits *atomic.Int64
}

// listenOnTheHost listens on every address of the host for TCP and UDP,
// counting connections and packets (hostListeners), and serves "allowed"
// on loopback; all close when the test ends.
func listenOnTheHost(t *testing.T) *egressHost {
	t.Helper()
	h := &egressHost{tcpHits: &atomic.Int64{}, udpHits: &atomic.Int64{}}
	h.hostPort, h.udpPort = hostListeners(t, h.tcpHits, h.udpHits)
	allowed := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "allowed") })}
	allowedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = allowed.Serve(allowedLn) }()
	t.Cleanup(func() { allowed.Close() })
	h.allowedLn = allowedLn
	h.outside, h.outHits = nstest.New(t), &atomic.Int64{}
	countAccepts(h.outside.Listen(t, 443), h.outHits)
	countPackets(h.outside.ListenPacket(t, 53), h.outHits)
	return h
}

// countAccepts counts and closes ln's connections until it closes.
func countAccepts(ln net.Listener, hits *atomic.Int64) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			_ = c.Close()
		}
	}()
}

// countPackets counts pc's packets until it closes.
func countPackets(pc net.PacketConn, hits *atomic.Int64) {
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			hits.Add(1)
		}
	}()
}

// egressTargets are the probe's targets: the host's services on each of
// its addresses, a container on another network, the stand-in for the
// outside (HTTPS, a resolver's port, a link-local address), the sandbox's
// routes and resolvers, and through the proxy the allowed service and a
// host no rule names.
func egressTargets(h *egressHost, other string) []string {
	var targets []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil && !ip.IsLoopback() {
			targets = append(targets, fmt.Sprintf("tcp %s %d", ip, h.hostPort), fmt.Sprintf("udp %s %d", ip, h.udpPort))
		}
	}
	targets = append(targets,
		fmt.Sprintf("tcp %s 8080", other),
		fmt.Sprintf("tcp %s 443", h.outside.Addr), fmt.Sprintf("udp %s 53", h.outside.Addr),
		fmt.Sprintf("tcp %s 443", h.outside.LinkLocal), "routes",
		"proxy http://"+h.allowedLn.Addr().String()+"/ok",
		"proxy http://denied.example/",
	)
	return targets
}

// egressRepo is a repository with one task file (feat/probe), the probe
// script and its targets.
func egressRepo(t *testing.T, targets []string) string {
	t.Helper()
	return scriptRepo(t, "feat/probe", map[string]string{"probe.pl": probeScript, "targets.txt": strings.Join(targets, "\n") + "\n"})
}

// scriptRepo is a repository with one task file (branch) and files, whose
// containers go when the test ends.
func scriptRepo(t *testing.T, branch string, files map[string]string) string {
	t.Helper()
	repo := shortDir(t)
	if err := os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{".aimi/tasks/" + strings.ReplaceAll(branch, "/", "-") + "-tasks.json": taskFileJSON(branch, 1)}
	for name, body := range files {
		all[name] = []byte(body)
	}
	for name, body := range all {
		if err := os.WriteFile(filepath.Join(repo, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "script"}} {
		gittest.Git(t, repo, args...)
	}
	removeProjectContainersAtEnd(t, repo)
	return repo
}

// checkSealedProbe fails t for every way out the probe of a sandbox on
// one engine found (checkProbe), for any route of it but the loopback's,
// and for whatever reached the host's services or the outside.
func checkSealedProbe(t *testing.T, branch, out string, h *egressHost) {
	t.Helper()
	checkProbe(t, branch, out)
	if !strings.Contains(out, "routes read") {
		t.Errorf("%s: the probe did not read the sandbox's routes", branch)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ROUTE") {
			t.Errorf("%s: the sandbox has a route: %s", branch, line)
		}
	}
	if n, m, o := h.tcpHits.Load(), h.udpHits.Load(), h.outHits.Load(); n != 0 || m != 0 || o != 0 {
		t.Errorf("the host's service got %d TCP connections and %d UDP packets from the sandbox, the outside %d", n, m, o)
	}
}

// reachedWithARoute shows that the stand-in for the outside is one a
// sandbox with a route would reach: the container on another network
// (the engine's bridge, masqueraded) connects to it. The count of what
// reached the outside starts again at zero afterwards.
func reachedWithARoute(t *testing.T, ctx context.Context, id string, h *egressHost) {
	t.Helper()
	cli := dockertest.Client(t)
	script := fmt.Sprintf(`print IO::Socket::INET->new(PeerAddr => "%s", PeerPort => 443, Timeout => 10) ? "OPEN" : "closed $@"`, h.outside.Addr)
	if out := execIn(t, ctx, cli, id, "perl", "-MIO::Socket::INET", "-e", script); out != "OPEN" {
		t.Fatalf("a container with a network does not reach the stand-in for the outside at %s: %s", h.outside.Addr, out)
	}
	testwait.Eventually(t, time.Minute, "the stand-in for the outside to count a connection",
		testwait.True(func() bool { return h.outHits.Load() > 0 }), testwait.Every(10*time.Millisecond))
	h.outHits.Store(0)
}

// otherNetworkContainer runs a container listening on 8080 on a network of
// the test's own and returns its address.
func otherNetworkContainer(t *testing.T, ctx context.Context, image string) string {
	t.Helper()
	ip, _ := otherNetwork(t, ctx, image)
	return ip
}

// otherNetwork is otherNetworkContainer, with the container's ID.
func otherNetwork(t *testing.T, ctx context.Context, image string) (ip, id string) {
	t.Helper()
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	labels := map[string]string{dockertest.LabelKey: run}
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	nw, err := cli.NetworkCreate(ctx, "aimi-egress-other-"+run[:8]+"-"+sfx, network.CreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      image,
		Entrypoint: []string{"perl", "-MIO::Socket::INET", "-e", `my $s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die; while (my $c = $s->accept) { close $c }`},
		Labels:     labels,
	}, &container.HostConfig{NetworkMode: container.NetworkMode(nw.ID)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := cli.ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range info.NetworkSettings.Networks {
		if ep.IPAddress != "" {
			return ep.IPAddress, c.ID
		}
	}
	t.Fatal("the other network's container has no address")
	return "", ""
}

// probeWaiting runs the probe in a pool sandbox waiting for its claim, by
// exec (its runner waits on stdin): every target of the start's probe, the
// loopback ports a claim would forward, and its socket directory, which
// must be empty. Nothing may answer.
func probeWaiting(t *testing.T, ctx context.Context, cli *client.Client, in container.InspectResponse, targets []string, hostPort int) {
	t.Helper()
	for _, port := range []int{contract.ProxyPort, gateway.SandboxPort} {
		targets = append(targets, fmt.Sprintf("tcp 127.0.0.1 %d", port))
	}
	const script = `d=$(mktemp -d) && cd "$d" && printf '%s\n' "$1" > targets.txt && printf '%s' "$2" > probe.pl && HOSTPORT="$3" perl probe.pl; cat probe-out.txt; echo "sockets:$(ls -A ` + contract.NetDir + `)"`
	out := execIn(t, ctx, cli, in.ID, "sh", "-c", script, "sh", strings.Join(targets, "\n"), probeScript, strconv.Itoa(hostPort))
	t.Logf("probe of the waiting pool sandbox %s:\n%s", in.Name, out)
	if !strings.Contains(out, "closed tcp") || !strings.Contains(out, "sockets:") {
		t.Fatalf("the probe did not run in the pool sandbox:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "OPEN") || strings.HasPrefix(line, "ROUTE") || strings.HasPrefix(line, "proxy ") && !strings.Contains(line, "closed") {
			t.Errorf("a pool sandbox before its claim got out: %s", line)
		}
		if rest, ok := strings.CutPrefix(line, "sockets:"); ok && strings.TrimSpace(rest) != "" {
			t.Errorf("a pool sandbox before its claim has sockets: %s", rest)
		}
	}
}
