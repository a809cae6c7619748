package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// TestSandboxDiskIsEnforcedOrSaidNotToBe: with sandbox.disk set, aimid
// either gives every container that writable-layer limit or, where the
// engine's storage driver cannot (fuse-overlayfs here), says so at start
// and runs the swarm without it instead of failing every create.
func TestSandboxDiskIsEnforcedOrSaidNotToBe(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	docker, err := container.NewDocker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	supported := docker.CheckDiskLimit(t.Context(), image, map[string]string{dockertest.LabelKey: dockertest.RunID()})
	if supported != nil && !errors.Is(supported, engine.ErrDiskLimitUnsupported) {
		t.Fatalf("CheckDiskLimit: %v", supported)
	}

	repo := gitRepo(t, 1, "disk")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  "agent:\n  env:\n    STANDIN_SCRIPT: \"auto|1\"\n",
		Env:     []string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_DISK=3g", "AIMI_GIT_MODE=remote"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--follow", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	cli := dockertest.Client(t)
	// Names are the engine's, shared with other tests: found by task file.
	in, err := cli.ContainerInspect(ctx, containerOf(t, validState(t, repo), "disk").ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	if supported == nil {
		want = strconv.Itoa(3 << 30)
	}
	if got := in.HostConfig.StorageOpt["size"]; got != want {
		t.Errorf("the container's storage-opt size = %q, want %q", got, want)
	}
	p.stop(t)
	logs := p.logs()
	if supported != nil && !strings.Contains(logs, "sandbox.disk is not enforced") {
		t.Errorf("the engine cannot limit the writable layer (%v), and aimid did not say so at start:\n%s", supported, logs)
	}
	if supported == nil && !strings.Contains(logs, "writable layer is limited") {
		t.Errorf("aimid did not say that sandbox.disk is enforced:\n%s", logs)
	}
}
