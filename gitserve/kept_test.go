package gitserve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// workScript makes, inside the sandbox image, what a remote-mode container
// leaves when origin refused its push: a workspace clone whose branch has
// commits nobody else has.
const workScript = `
set -eu
export HOME=/tmp
git config --global user.name sandbox
git config --global user.email sandbox@example.com
git init -q -b main /workspace
cd /workspace
echo one > one.txt && git add one.txt && git commit -qm one
git checkout -q -b "$BRANCH"
echo two > two.txt && git add two.txt && git commit -qm two
git pack-refs --all
echo three > three.txt && git add three.txt && git commit -qm three
echo "TIP $(git rev-parse HEAD)"
`

// TestKeeperTakesARemoteModeContainersWorkToOrigin: a stopped container
// (the real engine) holds commits its origin refused. The Keeper reads its
// branch tip, finds origin lacks it, keeps it in the checkout as a keep
// ref (refs and objects only), fails to push while origin refuses, pushes
// once origin accepts, and then finds origin holds it.
func TestKeeperTakesARemoteModeContainersWorkToOrigin(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	name := "aimi-keeper-test-" + run
	const branch = "feat/kept"
	stoppedContainerWithWork(t, ctx, cli, run, name, branch)
	user, hook := userWithRefusingOrigin(t)
	docker, err := container.NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	k := Keeper{Probe: EngineProbe{Files: docker}, Trees: docker, Scratch: t.TempDir()}
	cb := contract.ContainerBranch{Repo: user, Swarm: "swarm-k", Container: name, Branch: branch}
	tip, err := k.BranchTip(ctx, cb)
	if err != nil || !gitref.ValidOID(tip) {
		t.Fatalf("BranchTip = %q, %v", tip, err)
	}
	if on, err := k.OnOrigin(ctx, cb, tip); err != nil || on {
		t.Fatalf("OnOrigin before any push = %v, %v; want false", on, err)
	}
	if named, err := k.NamedByRef(ctx, user, tip); err != nil || named {
		t.Fatalf("NamedByRef before the keep = %v, %v; want false", named, err)
	}
	ref := contract.KeptRef(cb.Sandbox())
	if got, err := k.Keep(ctx, cb, ref); err != nil || got != tip {
		t.Fatalf("Keep = %q, %v; want %s", got, err, tip)
	}
	if named, err := k.NamedByRef(ctx, user, tip); err != nil || !named {
		t.Fatalf("NamedByRef after the keep = %v, %v; want true", named, err)
	}
	if n := mustGit(t, user, "rev-list", "--count", ref); n != "3" {
		t.Errorf("the keep ref has %s commits, want the container's 3", n)
	}
	if err := k.Push(ctx, cb, ref); err == nil || !strings.Contains(err.Error(), "protected branch") {
		t.Fatalf("Push while origin refuses = %v, want origin's refusal", err)
	}
	os.Remove(hook)
	if err := k.Push(ctx, cb, ref); err != nil {
		t.Fatal(err)
	}
	if on, err := k.OnOrigin(ctx, cb, tip); err != nil || !on {
		t.Fatalf("OnOrigin after the push = %v, %v; want true", on, err)
	}
	if err := k.Drop(ctx, user, ref); err != nil {
		t.Fatal(err)
	}
	if err := k.Drop(ctx, user, "refs/heads/main"); err == nil {
		t.Error("Drop deleted a ref outside the keep namespace")
	}
	if _, err := k.Keep(ctx, cb, "refs/heads/"+branch); err == nil {
		t.Error("Keep wrote a ref outside the keep namespace")
	}
}

// stoppedContainerWithWork runs workScript in a container called name of
// the sandbox image, labelled with run for the test's cleanup, and waits
// for its exit, so that the Keeper reads the work of branch from a
// stopped container, as it does after a swarm.
func stoppedContainerWithWork(t *testing.T, ctx context.Context, cli *client.Client, run, name, branch string) {
	t.Helper()
	created, err := cli.ContainerCreate(ctx, &dcontainer.Config{
		Image: sandboxImage(t), Entrypoint: []string{"/bin/sh", "-c", workScript},
		Labels: map[string]string{dockertest.LabelKey: run}, Env: []string{"BRANCH=" + branch},
	}, &dcontainer.HostConfig{NetworkMode: "none"}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	waitC, errC := cli.ContainerWait(ctx, created.ID, dcontainer.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, dcontainer.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Fatalf("work script exited %d", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
}

// userWithRefusingOrigin makes a user's checkout whose origin is a bare
// repository refusing every push, as a protected branch would, until the
// returned pre-receive hook is removed.
func userWithRefusingOrigin(t *testing.T) (user, hook string) {
	t.Helper()
	origin := filepath.Join(t.TempDir(), "origin.git")
	mustGit(t, "", "init", "-q", "--bare", origin)
	hook = filepath.Join(origin, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho protected branch >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	user = newRepo(t)
	mustGit(t, user, "remote", "add", "origin", origin)
	return user, hook
}
