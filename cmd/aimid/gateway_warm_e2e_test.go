package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// TestModelKeyStaysInTheDaemonWithClaimedSandboxes is
// TestModelKeyStaysInTheDaemon's probe in two sandboxes claimed from a
// warm pool, whose placeholders, gateway forward and CA came in their
// claim lines: each calls the model through the gateway (JSON and a
// stream) and succeeds, and finds the real key nowhere it can read; the
// engine's environment of either holds no key or placeholder at all.
func TestModelKeyStaysInTheDaemonWithClaimedSandboxes(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	key, up, cfg := probeKey(t)
	image := dockertest.BuildGoImage(t, ctx, map[string]string{"/probe": "github.com/aimi-tools/swarm/gateway/internal/probeagent"}, nil, nil)
	repo := gitRepo(t, 1, "one", "two")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	instance := testInstance(sock)
	dockertest.Cleanup(t, contract.LabelDaemon, instance)
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Image:    image,
		Env:      []string{"GW_TEST_KEY=" + key, "AIMI_MODELS_ANTHROPIC_URL=" + up.URL, "AIMI_SANDBOX_WARM_POOL=2"},
	})
	cli := dockertest.Client(t)
	waitPool(t, ctx, cli, instance, 2, p)
	run, answers := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "both containers running", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 2 && v.State.Containers[0].Status == state.StatusRunning && v.State.Containers[1].Status == state.StatusRunning
	})
	for _, c := range []*state.Container{v.State.ContainerForTask(taskPath("one")), v.State.ContainerForTask(taskPath("two"))} {
		if c == nil {
			t.Fatalf("containers by task file: %+v", v.State.Containers)
		}
		if verdict := claimedProbe(t, ctx, repo, v.State.SwarmID, c); verdict != "OK" {
			t.Errorf("%s: %s", c.ContainerName, verdict)
		}
		if !hasWarmNote(t, repo, v.State.SwarmID, c.ContainerName) {
			t.Errorf("%s was created, not claimed from the pool", c.ContainerName)
		}
		info, err := cli.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range info.Config.Env {
			if strings.HasPrefix(kv, "ANTHROPIC_") {
				t.Errorf("%s: the engine's environment holds %s", c.ContainerName, strings.SplitN(kv, "=", 2)[0])
			}
		}
		execIn(t, ctx, cli, c.ContainerID, "/probe", "release")
	}
	waitFor(t, sock, repo, 3*time.Minute, "all finished", allExited)
	p.stop(t)
	if strings.Contains(p.logs(), key) {
		t.Error("the daemon's log holds the key")
	}
	for _, a := range *answers {
		if strings.Contains(a, key) {
			t.Error("a CLI answer holds the key")
		}
	}
}

// probeKey is a fake model key, a provider that takes only it, and the
// daemon config whose agent.env gives the key (from GW_TEST_KEY) and its
// fingerprint (prefix, length, SHA-256) to the probe agent.
func probeKey(t *testing.T) (key string, up *httptest.Server, cfg string) {
	var rnd [16]byte
	rand.Read(rnd[:])
	const keyPrefix = "sk-ant-fake-"
	key = keyPrefix + hex.EncodeToString(rnd[:])
	sum := sha256.Sum256([]byte(key))
	cfg = "agent:\n  env:\n    ANTHROPIC_API_KEY: ${GW_TEST_KEY}\n" +
		"    PROBE_KEY_PREFIX: " + keyPrefix + "\n    PROBE_KEY_LEN: \"" + strconv.Itoa(len(key)) + "\"\n" +
		"    PROBE_KEY_SHA256: " + hex.EncodeToString(sum[:]) + "\n"
	return key, fakeProvider(t, key), cfg
}

// claimedProbe waits for the probe's verdict in c; when its container
// ends first, it fails with the container's journal.
func claimedProbe(t *testing.T, ctx context.Context, repo, swarmID string, c *state.Container) string {
	t.Helper()
	cli := dockertest.Client(t)
	var verdict string
	testwait.Eventually(t, 2*time.Minute, "the probe's verdict in "+c.ContainerName, func() error {
		info, err := cli.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		if !info.State.Running {
			recs, _ := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", swarmID, c.ContainerName+".ndjson"))
			var lines []string
			for _, r := range recs {
				lines = append(lines, r.Stream+" "+r.Raw+string(r.Message))
			}
			t.Fatalf("%s ended (exit %d) before its verdict; journal:\n%s", c.ContainerName, info.State.ExitCode, strings.Join(lines, "\n"))
		}
		out, code := execCode(t, ctx, cli, c.ContainerID, "/probe", "report")
		if code != 0 {
			return fmt.Errorf("the probe's report: exit %d %s", code, out)
		}
		verdict = out
		return nil
	}, testwait.Every(200*time.Millisecond))
	return verdict
}
