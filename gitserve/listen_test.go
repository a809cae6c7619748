package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// tcpListening reports whether the host has a TCP socket listening on
// ip:port, as /proc/net/tcp lists them (whatever the service believes).
func tcpListening(t *testing.T, ip string, port int) bool {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	defer f.Close()
	v4 := net.ParseIP(ip).To4()
	// /proc/net/tcp prints the address as a host-order (little-endian)
	// 32-bit number.
	want := strings.ToUpper(hex.EncodeToString([]byte{v4[3], v4[2], v4[1], v4[0]})) + fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && fields[1] == want && fields[3] == "0A" {
			return true
		}
	}
	return false
}

func (s *Service) portOn(ip string) int {
	return s.listen.Port(ip)
}

func TestStopsListeningOnANetworkThatIsGone(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	netName := "aimi-gitserve-gone-" + run
	gateway := swarmNetwork(ctx, t, cli, netName, map[string]string{dockertest.LabelKey: run})

	dir := filepath.Join(t.TempDir(), "data")
	s, _ := newService(t, Options{DataDir: dir, SweepInterval: 100 * time.Millisecond})
	if err := s.ListenOn(ctx, gateway); err != nil {
		t.Fatal(err)
	}
	port := s.portOn(gateway)
	if !tcpListening(t, gateway, port) {
		t.Fatalf("not listening on %s:%d after ListenOn", gateway, port)
	}
	if err := cli.NetworkRemove(ctx, netName); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 20*time.Second, "the service to stop listening on the gateway of a removed network", func() error {
		if tcpListening(t, gateway, port) {
			return fmt.Errorf("still listening on %s:%d", gateway, port)
		}
		return nil
	}, testwait.Every(50*time.Millisecond))
	for _, ip := range s.Listening() {
		if ip == gateway {
			t.Errorf("the service still lists %s", gateway)
		}
	}
	// Nor is the address listened on again after a restart.
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, stateName))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"`+gateway+`"`)) {
		t.Errorf("grants.json still lists the gone gateway %s:\n%s", gateway, data)
	}
}

// TestTokenIsBoundToTheAddressThatUsedItFirst: a token works from the
// address that used it first and from no other (127.0.0.2 is another
// address on the loopback's subnet).
func TestTokenIsBoundToTheAddressThatUsedItFirst(t *testing.T) {
	ctx := ctxT(t)
	s, _ := newService(t, Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-pin", Container: "aimi-pin", Branch: "feat-pin"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	get := func(from string) int {
		pool := caPool(t, g.CAFile)
		c := &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext,
			DisableKeepAlives: true,
		}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.RepoURL+"/info/refs?service=git-upload-pack", nil)
		req.Header.Set("Authorization", "Bearer "+g.Token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request from %s: %v", from, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("127.0.0.1"); code != http.StatusOK {
		t.Fatalf("first use: %d", code)
	}
	if code := get("127.0.0.2"); code != http.StatusUnauthorized {
		t.Errorf("the token from another address: %d, want 401", code)
	}
	if code := get("127.0.0.1"); code != http.StatusOK {
		t.Errorf("the token from its own address again: %d", code)
	}
}

// runOn runs script in the sandbox image on network netName with the
// service's CA mounted and returns its output.
func runOn(ctx context.Context, t *testing.T, cli *client.Client, tag, netName, caFile string, labels map[string]string, env []string, script string) string {
	t.Helper()
	const caInContainer = "/etc/aimi/git-ca.pem"
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image: tag, Entrypoint: []string{"/bin/sh", "-c", script}, Labels: labels,
		Env: append(env, "GIT_SSL_CAINFO="+caInContainer, "GIT_TERMINAL_PROMPT=0", "HOME=/tmp"),
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: caFile, Target: caInContainer, ReadOnly: true}},
	}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	logs := func() string {
		rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var out bytes.Buffer
		_, _ = stdcopy.StdCopy(&out, &out, rc)
		return out.String()
	}
	// Done when it exits, or when it says UP and stays (a running sandbox
	// keeps its address; the test's cleanup removes it).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-waitC:
			return logs()
		case err := <-errC:
			t.Fatalf("wait for the container: %v", err)
		case <-tick.C:
			if out := logs(); strings.Contains(out, "UP\n") {
				return out
			}
		}
	}
}

// results reads the "RESULT <name> ok|refused" lines of a script's output.
func results(out string) map[string]string {
	r := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RESULT" {
			r[f[1]] = f[2]
		}
	}
	return r
}

const tryScript = `
run() {
	name=$1; shift
	if "$@" >/tmp/out 2>&1; then echo "RESULT $name ok"; else echo "RESULT $name refused"; fi
	sed 's/^/  | /' /tmp/out
}
`

// TestTokensAndGatewaysAreBoundToTheirSwarm: two swarms' networks, the
// service listening on both gateways. A's container uses A's token; a
// container on B's network can use neither A's token (through either
// gateway) nor B's token through A's gateway, nor reach A's gateway at
// all; and a second container on A's network cannot use the token the
// first one used.
func TestTokensAndGatewaysAreBoundToTheirSwarm(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	tag := sandboxImage(t)
	labels := map[string]string{dockertest.LabelKey: run}
	netA, netB := "aimi-gitserve-a-"+run, "aimi-gitserve-b-"+run
	gwA := swarmNetwork(ctx, t, cli, netA, labels)
	gwB := swarmNetwork(ctx, t, cli, netB, labels)

	s, _ := newService(t, Options{DataDir: filepath.Join(t.TempDir(), "data")})
	for _, gw := range []string{gwA, gwB} {
		if err := s.ListenOn(ctx, gw); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Grant(ctx, contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-a", Container: "aimi-a", Branch: "feat-a"}, gwA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Grant(ctx, contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-b", Container: "aimi-b", Branch: "feat-b"}, gwB)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.RepoURL, "//"+gwA+":") || !strings.Contains(b.RepoURL, "//"+gwB+":") {
		t.Fatalf("repository URLs %s and %s do not name their swarms' gateways", a.RepoURL, b.RepoURL)
	}
	env := []string{"URL_A=" + a.RepoURL, "URL_B=" + b.RepoURL, "TOKEN_A=" + a.Token, "TOKEN_B=" + b.Token,
		"A_VIA_B=" + strings.Replace(a.RepoURL, gwA, gwB, 1), "B_VIA_A=" + strings.Replace(b.RepoURL, gwB, gwA, 1)}

	// A's container stays up (holding its address) until the end, as a
	// running sandbox does.
	outA := runOn(ctx, t, cli, tag, netA, a.CAFile, labels, env, tryScript+`run own git -c http.extraHeader="Authorization: Bearer $TOKEN_A" ls-remote "$URL_A"; echo UP; sleep 300`)
	if got := results(outA)["own"]; got != "ok" {
		t.Fatalf("swarm A's container with its own token: %q\n%s", got, outA)
	}
	outB := runOn(ctx, t, cli, tag, netB, b.CAFile, labels, env, tryScript+`
run own git -c http.extraHeader="Authorization: Bearer $TOKEN_B" ls-remote "$URL_B"
run a-token-via-a git -c http.extraHeader="Authorization: Bearer $TOKEN_A" ls-remote "$URL_A"
run a-token-via-b git -c http.extraHeader="Authorization: Bearer $TOKEN_A" ls-remote "$A_VIA_B"
run b-token-via-a git -c http.extraHeader="Authorization: Bearer $TOKEN_B" ls-remote "$B_VIA_A"
`)
	want := map[string]string{"own": "ok", "a-token-via-a": "refused", "a-token-via-b": "refused", "b-token-via-a": "refused"}
	got := results(outB)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("swarm B's container, %s: %q, want %q", name, got[name], w)
		}
	}
	outA2 := runOn(ctx, t, cli, tag, netA, a.CAFile, labels, env, tryScript+`run stolen git -c http.extraHeader="Authorization: Bearer $TOKEN_A" ls-remote "$URL_A"`)
	if got := results(outA2)["stolen"]; got != "refused" {
		t.Errorf("another container on A's network with the token A's container used: %q, want refused", got)
	}
	if t.Failed() {
		t.Logf("A:\n%s\nB:\n%s\nA2:\n%s", outA, outB, outA2)
	}
}
