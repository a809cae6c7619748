package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/clustertest"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/swarmmode"
)

// TestSwarmBackendModelKeyStaysInTheDaemon is TestModelKeyStaysInTheDaemon
// on the cluster: two probe sandboxes whose agent.env holds
// ANTHROPIC_API_KEY call the model (JSON and a stream) through their
// relays, the daemon's door and the model gateway, and succeed; neither
// finds the real key in any process's environment or command line or any
// readable file; the daemon's log and the CLI's answers hold no key.
func TestSwarmBackendModelKeyStaysInTheDaemon(t *testing.T) {
	parallelCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var rnd [16]byte
	rand.Read(rnd[:])
	const keyPrefix = "sk-ant-fake-"
	key := keyPrefix + hex.EncodeToString(rnd[:])
	sum := sha256.Sum256([]byte(key))
	up := fakeProvider(t, key)
	// The probe is also its relay (probeagent net-relay).
	image := dockertest.BuildGoImage(t, ctx, map[string]string{"/probe": "github.com/aimi-tools/swarm/gateway/internal/probeagent"}, nil, nil)
	c := testCluster(t, image)
	repo := gitRepo(t, 1, "one", "two")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	cfg := "agent:\n  env:\n    ANTHROPIC_API_KEY: ${GW_TEST_KEY}\n" +
		"    PROBE_KEY_PREFIX: " + keyPrefix + "\n    PROBE_KEY_LEN: \"" + strconv.Itoa(len(key)) + "\"\n" +
		"    PROBE_KEY_SHA256: " + hex.EncodeToString(sum[:]) + "\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Base:     cleanEnv(),
		Env:      append(swarmSettings(c, image), "GW_TEST_KEY="+key, "AIMI_MODELS_ANTHROPIC_URL="+up.URL, "AIMI_GIT_MODE=remote"),
	})
	run, answers := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, clusterWork, "both containers created", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 2 && v.State.Containers[0].ContainerID != "" && v.State.Containers[1].ContainerID != ""
	})
	for _, task := range []string{"one", "two"} {
		sc := v.State.ContainerForTask(taskPath(task))
		if sc == nil {
			t.Fatalf("no container for %s: %+v", task, v.State.Containers)
		}
		cli, id := taskContainer(t, ctx, c, testInstance(sock), sc)
		if verdict := waitProbe(t, ctx, cli, id); verdict != "OK" {
			t.Errorf("%s: %s", sc.ContainerName, verdict)
		}
		execIn(t, ctx, cli, id, "/probe", "release")
	}
	waitFor(t, sock, repo, clusterWork, "all finished", allExited)
	p.stop(t)
	if strings.Contains(p.logs(), key) {
		t.Error("the daemon's log holds the key")
	}
	for _, a := range *answers {
		if strings.Contains(a, key) {
			t.Error("a CLI answer holds the key")
		}
	}
	eng, err := swarmmode.New(ctx, c.Manager().Client, swarmmode.Options{Instance: testInstance(sock), NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range validState(t, repo).Containers {
		_ = eng.Remove(ctx, sc.ContainerID)
	}
}

// taskContainer finds the container of sc's task on its node (within two
// minutes: the task may not have started yet) and that node's client.
func taskContainer(t *testing.T, ctx context.Context, c *clustertest.Cluster, instance string, sc *state.Container) (*client.Client, string) {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", contract.LabelContainer+"="+sc.ContainerName), filters.Arg("label", contract.LabelDaemon+"="+instance),
		filters.Arg("label", contract.LabelSandbox+"=true"))
	var cli *client.Client
	var id string
	testwait.Eventually(t, clusterWork, "the task of "+sc.ContainerName+" running on a node", func() error {
		for _, n := range c.Nodes {
			cs, err := n.Client.ContainerList(ctx, container.ListOptions{Filters: f})
			if err == nil && len(cs) == 1 && cs[0].State == "running" {
				t.Logf("%s runs on %s", sc.ContainerName, n.Name)
				cli, id = n.Client, cs[0].ID
				return nil
			}
		}
		return testwait.ErrNotYet
	}, testwait.Every(300*time.Millisecond))
	return cli, id
}
