package gitserve

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// containerScript runs inside the sandbox image and tries every case; each
// prints "RESULT <name> ok|refused" followed by git's output.
const containerScript = `
set -u
export HOME=/tmp
git config --global user.name sandbox
git config --global user.email sandbox@example.com
H="Authorization: Bearer $TOKEN_A"
run() {
	name=$1; shift
	if "$@" >/tmp/out 2>&1; then echo "RESULT $name ok"; else echo "RESULT $name refused"; fi
	sed 's/^/  | /' /tmp/out
}
run clone git -c http.extraHeader="$H" clone -q "$URL" /workspace
cd /workspace || exit 3
git checkout -q -b "$BRANCH_A"
echo one > one.txt && git add one.txt && git commit -qm one
echo "FIRST $(git rev-parse HEAD)"
run push-own-branch git -c http.extraHeader="$H" push -q origin "HEAD:refs/heads/$BRANCH_A"
echo two > two.txt && git add two.txt && git commit -qm two
echo "SECOND $(git rev-parse HEAD)"
run push-main git -c http.extraHeader="$H" push origin HEAD:refs/heads/main
run push-other-branch git -c http.extraHeader="$H" push origin "HEAD:refs/heads/$BRANCH_B"
run push-tag git -c http.extraHeader="$H" push origin HEAD:refs/tags/v1
run push-no-token git push origin "HEAD:refs/heads/$BRANCH_A"
run push-bad-token git -c http.extraHeader="Authorization: Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" push origin "HEAD:refs/heads/$BRANCH_A"
run push-other-token git -c http.extraHeader="Authorization: Bearer $TOKEN_B" push origin "HEAD:refs/heads/$BRANCH_A"
run clone-other-repo git -c http.extraHeader="$H" clone -q "$OTHER_URL" /tmp/o
run basic-auth git -c http.extraHeader="Authorization: Basic $(printf 'x:%s' "$TOKEN_A" | base64 -w0)" ls-remote origin
run no-ca env GIT_SSL_CAINFO=/dev/null SSL_CERT_FILE=/dev/null git -c http.extraHeader="$H" ls-remote origin
git branch packed-one HEAD~1
git pack-refs --all
echo three > three.txt && git add three.txt && git commit -qm three
echo "THIRD $(git rev-parse HEAD)"
echo "PACKED $(git rev-parse packed-one)"
echo DONE
`

// swarmNetwork creates a bridge network as a swarm's (icc off) with labels
// and returns its gateway, the address the service listens on for it.
func swarmNetwork(ctx context.Context, t *testing.T, cli *client.Client, name string, labels map[string]string) string {
	t.Helper()
	if _, err := cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:  "bridge",
		Labels:  labels,
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
	}); err != nil {
		t.Fatalf("create network: %v", err)
	}
	ni, err := cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil || len(ni.IPAM.Config) == 0 || ni.IPAM.Config[0].Gateway == "" {
		t.Fatalf("inspect network %s: %v %+v", name, err, ni.IPAM)
	}
	return ni.IPAM.Config[0].Gateway
}

// TestServiceFromAContainer runs real git in the sandbox image on a swarm
// network (icc off) against the service listening on that network's
// gateway: the container's own branch goes through, everything else is
// refused, and the mirror holds exactly what was allowed.
func TestServiceFromAContainer(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)

	tag := sandboxImage(t)

	labels := map[string]string{dockertest.LabelKey: run}
	netName := "aimi-gitserve-test-" + run
	gateway := swarmNetwork(ctx, t, cli, netName, labels)

	repo := newRepo(t)
	// The daemon's defaults, engine probe included.
	s, logs := newServiceWithEngine(t, Options{})
	if err := s.ListenOn(ctx, gateway); err != nil {
		t.Fatal(err)
	}
	// Named as the orchestrator names them: the engine probe finds the
	// container by the granted name.
	nameA := "aimi-gitserve-test-" + run
	a, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-c", Container: nameA, Branch: "feat/ca"}, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: "swarm-c", Container: "aimi-cb", Branch: "feat-cb"}, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Grant(ctx, contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-other", Container: "aimi-co", Branch: "feat-co"}, "")
	if err != nil {
		t.Fatal(err)
	}
	id, out := runContainerScript(t, ctx, cli, tag, netName, labels, nameA, a, b, other)
	rep := parseContainerScript(out)
	checkContainerScriptResults(t, out, rep.results)
	mirror := s.mirrorPath("swarm-c")
	refs := mustGit(t, mirror, "for-each-ref", "--format=%(refname) %(objectname)")
	wantRefs := "refs/heads/feat/ca " + rep.first + "\nrefs/heads/main " + mustGit(t, repo, "rev-parse", "main")
	if rep.first == "" || refs != wantRefs {
		t.Errorf("mirror refs:\n%s\nwant:\n%s", refs, wantRefs)
	}
	if _, err := gitOut(mirror, nil, "cat-file", "-e", rep.second); err == nil {
		t.Errorf("the refused commit %s reached the mirror", rep.second)
	}

	checkEngineProbe(t, ctx, s, id, contract.ContainerBranch{Repo: repo, Swarm: "swarm-c", Container: nameA, Branch: "feat/ca"}, run, rep, out)

	for _, secret := range []string{a.Token, b.Token, other.Token} {
		if strings.Contains(logs.String(), secret) {
			t.Error("a token is in the service's logs")
		}
	}
	if t.Failed() {
		t.Logf("container output:\n%s", out)
	}
}

// runContainerScript runs containerScript in a container named nameA of
// the sandbox image tag on the network netName, with a's, b's and other's
// grants and a's CA mounted, until it exits; it returns the container and
// its output, which must say DONE.
func runContainerScript(t *testing.T, ctx context.Context, cli *client.Client, tag, netName string, labels map[string]string, nameA string, a, b, other Grant) (id, out string) {
	t.Helper()
	const caInContainer = "/etc/aimi/git-ca.pem"
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      tag,
		Entrypoint: []string{"/bin/sh", "-c", containerScript},
		Labels:     labels,
		Env: []string{
			"URL=" + a.RepoURL, "OTHER_URL=" + other.RepoURL,
			"TOKEN_A=" + a.Token, "TOKEN_B=" + b.Token,
			"BRANCH_A=feat/ca", "BRANCH_B=feat-cb",
			"GIT_SSL_CAINFO=" + caInContainer, // as the orchestrator sets it: git only, not SSL_CERT_FILE
			"GIT_TERMINAL_PROMPT=0",
		},
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: a.CAFile, Target: caInContainer, ReadOnly: true}},
	}, nil, nil, nameA)
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatalf("wait for the container: %v", err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	_, _ = stdcopy.StdCopy(&stdout, &stderr, rc)
	rc.Close()
	out = stdout.String() + stderr.String()
	if !strings.Contains(out, "DONE") {
		t.Fatalf("container script did not finish:\n%s", out)
	}
	return created.ID, out
}

// containerScriptReport is what containerScript printed: each attempt's
// result and the commits it made.
type containerScriptReport struct {
	results                      map[string]string
	first, second, third, packed string
}

func parseContainerScript(out string) containerScriptReport {
	r := containerScriptReport{results: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "RESULT":
			r.results[f[1]] = f[2]
		case len(f) == 2 && f[0] == "FIRST":
			r.first = f[1]
		case len(f) == 2 && f[0] == "SECOND":
			r.second = f[1]
		case len(f) == 2 && f[0] == "THIRD":
			r.third = f[1]
		case len(f) == 2 && f[0] == "PACKED":
			r.packed = f[1]
		}
	}
	return r
}

// checkContainerScriptResults checks which of the script's attempts went
// through and that git's output gives the refusals' reasons.
func checkContainerScriptResults(t *testing.T, out string, results map[string]string) {
	t.Helper()
	want := map[string]string{
		"clone": "ok", "push-own-branch": "ok", "basic-auth": "ok",
		"push-main": "refused", "push-other-branch": "refused", "push-tag": "refused",
		"push-no-token": "refused", "push-bad-token": "refused", "push-other-token": "refused",
		"clone-other-repo": "refused", "no-ca": "refused",
	}
	for name, w := range want {
		if results[name] != w {
			t.Errorf("%s: %q, want %q", name, results[name], w)
		}
	}
	if !strings.Contains(out, "may push only refs/heads/feat/ca") || !strings.Contains(out, "may push only refs/heads/feat-cb") {
		t.Errorf("refusal reasons missing from git's output")
	}
}

// checkEngineProbe checks the engine probe reads the stopped container's
// branches: a loose ref (newer than its stale packed entry), a packed one,
// a missing one (what HEAD names stands in for it: the agent may have
// renamed it); and Unreceived of cb with it names the commit the service
// never got.
func checkEngineProbe(t *testing.T, ctx context.Context, s *Service, id string, cb contract.ContainerBranch, run string, rep containerScriptReport, out string) {
	t.Helper()
	third, packed := rep.third, rep.packed
	if third == "" || packed == "" {
		t.Fatalf("script printed no THIRD/PACKED commits:\n%s", out)
	}
	probe := s.opts.TipProbe // the EngineProbe of newServiceWithEngine
	for branch, want := range map[string]string{"feat/ca": third, "packed-one": packed, "nosuch": third} {
		got, err := probe.BranchTip(ctx, id, branch)
		if err != nil || got != want {
			t.Errorf("BranchTip(%s) = %q, %v; want %q", branch, got, err, want)
		}
	}
	if commits, err := s.Unreceived(ctx, cb); err != nil || len(commits) != 1 || commits[0] != third {
		t.Errorf("Unreceived with the engine probe = %v, %v; want [%s]", commits, err, third)
	}
	if tip, err := probe.BranchTip(ctx, "aimi-no-such-container-"+run, "feat/ca"); err != nil || tip != "" {
		t.Errorf("BranchTip of a missing container = %q, %v", tip, err)
	}
}
