package gitserve

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	aimicontainer "github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// probeScript makes, in one sandbox, the workspaces an agent can leave
// behind: each has commits on branch feat that nobody received, hidden
// from a reader of refs/heads/feat in a different way. The image runs as
// an unprivileged user: the workspaces live under /tmp.
const probeScript = `
set -eu
export HOME=/tmp
git config --global user.name a && git config --global user.email a@example.com
mk() { git init -q -b main "$1" && cd "$1" && echo base > f && git add f && git commit -qm base && git checkout -q -b feat && echo work > g && git add g && git commit -qm work; }
(mk /tmp/w-plain; echo "TIP plain $(git rev-parse HEAD)")
(mk /tmp/w-symlink; mv .git/refs/heads/feat .git/feat-tip; ln -s ../../feat-tip .git/refs/heads/feat; echo "TIP symlink $(cat .git/feat-tip)")
(mk /tmp/w-renamed; git branch -q -m feat elsewhere; echo "TIP renamed $(git rev-parse HEAD)")
(mk /tmp/w-gitfile; mv .git /tmp/gitdir-elsewhere; echo "gitdir: /tmp/gitdir-elsewhere" > .git; echo "TIP gitfile $(git rev-parse HEAD)")
(mk /tmp/w-detached; git checkout -q --detach; git branch -q -D feat; echo "TIP detached $(git rev-parse HEAD)")
(git init -q -b main --ref-format=reftable /tmp/w-reftable 2>/dev/null && cd /tmp/w-reftable && echo x > f && git add f && git commit -qm x && git checkout -q -b feat && echo "TIP reftable $(git rev-parse HEAD)") || echo "NOREFTABLE"
echo DONE
`

// TestEngineProbeOnWhatAnAgentLeaves reads, through the real engine, the
// branch of workspaces an agent changed under the runner: a symlinked ref,
// a renamed branch, a detached HEAD with the branch deleted, a .git file
// pointing elsewhere, and (where git can make them) refs in
// the reftable format. Each must name the commits or fail: none may read
// as "no branch, nothing unreceived".
func TestEngineProbeOnWhatAnAgentLeaves(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	tag := sandboxImage(t)
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image: tag, Entrypoint: []string{"/bin/sh", "-c", probeScript},
		Labels: map[string]string{dockertest.LabelKey: run},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
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
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	rc.Close()
	if !strings.Contains(out.String(), "DONE") {
		t.Fatalf("script did not finish:\n%s", out.String())
	}
	tips := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "TIP" {
			tips[f[1]] = f[2]
		}
	}
	docker, err := aimicontainer.NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	probe := func(ws string) (string, error) {
		return EngineProbe{Files: docker, Workspace: ws}.BranchTip(ctx, created.ID, "feat")
	}
	for name, wantTip := range map[string]bool{"plain": true, "renamed": true, "detached": true, "symlink": false, "gitfile": false, "reftable": false} {
		if _, ok := tips[name]; !ok {
			if name == "reftable" {
				t.Logf("this git cannot make a reftable repository; case skipped")
				continue
			}
			t.Fatalf("no tip for %s in:\n%s", name, out.String())
		}
		got, err := probe("/tmp/w-" + name)
		switch {
		case wantTip && (err != nil || got != tips[name]):
			t.Errorf("%s: BranchTip = %q, %v; want %s", name, got, err, tips[name])
		case !wantTip && err == nil:
			t.Errorf("%s: BranchTip = %q, nil; want an error (the commits cannot be read, so they must not read as absent)", name, got)
		}
	}
	if got, err := probe("/no-repository"); err != nil || got != "" {
		t.Errorf("no repository: BranchTip = %q, %v; want \"\", nil", got, err)
	}
}
