package gitserve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/fixtures"
	"github.com/aimi-tools/swarm/publish"
)

// TestRunnerThroughTheService: the real acp-runner (demo agent) in the
// sandbox image, on a swarm network, clones from the service with its
// token, pushes its branch story by story; a publisher reading the service brings the branch into
// the user's checkout and Unreceived, reading the exited container, finds
// nothing missing. The token appears in no log.
func TestRunnerThroughTheService(t *testing.T) {
	fixture := fixtures.Read(t, "tasks/valid/2026-11-20-linear-tasks.json")
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	tag := sandboxImage(t)

	labels := map[string]string{dockertest.LabelKey: run}
	netName := "aimi-gitserve-e2e-" + run
	gateway := swarmNetwork(ctx, t, cli, netName, labels)

	repo := newRepo(t)
	taskPath := ".aimi/tasks/2026-11-20-linear-tasks.json"
	if err := os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	commitFile(t, repo, taskPath, string(fixture))
	mainTip := mustGit(t, repo, "rev-parse", "HEAD")

	s, logs := newServiceWithEngine(t, Options{})
	// As the daemon does at start: until it has, the runner's budget
	// question gets 503 and the story waits (budgets fail closed).
	s.SetBudgets(goBudgets{})
	if err := s.ListenOn(ctx, gateway); err != nil {
		t.Fatal(err)
	}
	swarmID := uuid.NewString()
	name := "aimi-gitserve-e2e-" + run
	const branch = "feat/linear"
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: repo, Swarm: swarmID, Container: name, Branch: branch}, "")
	if err != nil {
		t.Fatal(err)
	}
	created := createRunnerContainer(t, ctx, cli, tag, netName, labels, name, g)
	req, _ := json.Marshal(map[string]any{
		"type": "task-request", "timestamp": time.Now().UTC().Format(time.RFC3339),
		"swarmId": swarmID, "containerId": created.ID,
		"payload": map[string]any{"taskFilePath": taskPath, "branchName": branch, "repoUrl": g.RepoURL, "envVars": map[string]string{}},
	})
	code, stdout, stderr := dockertest.RunWithStdin(t, ctx, cli, created.ID, req)
	defer func() {
		if t.Failed() {
			t.Logf("runner exit %d\nstdout:\n%s\nstderr:\n%s\nservice log:\n%s", code, stdout, stderr, logs)
		}
	}()
	if !strings.Contains(stdout, `"type":"completion"`) || !strings.Contains(stdout, `"status":"completed"`) {
		t.Fatalf("no completed completion from the runner (exit %d)", code)
	}

	mirror := s.mirrorPath(swarmID)
	tip := mustGit(t, mirror, "rev-parse", "refs/heads/"+branch)
	if n, _ := strconv.Atoi(mustGit(t, mirror, "rev-list", "--count", mainTip+".."+tip)); n < 3 {
		t.Errorf("the runner pushed %d commit(s) on %s, want at least one per story (3)", n, branch)
	}
	if commits, err := s.Unreceived(ctx, contract.ContainerBranch{Repo: repo, Swarm: swarmID, Container: name, Branch: branch}); err != nil || len(commits) != 0 {
		t.Errorf("Unreceived after the run = %v, %v; want none", commits, err)
	}
	s.Revoke(contract.Sandbox{Swarm: swarmID, Container: name})
	// No token in its environment: the publisher stops at the checkout.
	pub := publish.NewPublisher(s, publish.Options{Getenv: func(string) string { return "" }})
	pr, err := pub.Publish(ctx, contract.ContainerBranch{Repo: repo, Swarm: swarmID, Container: name, Branch: branch})
	if err != nil || pr != nil {
		t.Fatalf("Publish = %v, %v; want the branch in the checkout and no PR", pr, err)
	}
	if got := mustGit(t, repo, "rev-parse", "refs/heads/"+branch); got != tip {
		t.Fatalf("checkout %s = %s, want %s", branch, got, tip)
	}
	for _, f := range []string{"step-1.txt", "step-2.txt", "step-3.txt"} {
		if _, err := gitOut(repo, nil, "cat-file", "-e", branch+":"+f); err != nil {
			t.Errorf("%s is not on the published branch", f)
		}
	}
	for where, text := range map[string]string{"service log": logs.String(), "runner stdout": stdout, "runner stderr": stderr} {
		if strings.Contains(text, g.Token) {
			t.Errorf("the token is in the %s", where)
		}
	}
}

// goBudgets answers every budget question: go.
type goBudgets struct{}

func (goBudgets) ServeBudget(w http.ResponseWriter, _ *http.Request, _ contract.Caller) {
	json.NewEncoder(w).Encode(contract.BudgetAnswer{State: contract.BudgetGo})
}

// createRunnerContainer creates the sandbox image tag's container name on
// netName, with stdin open, the demo agent, g's token and g's CA mounted
// where git reads it.
func createRunnerContainer(t *testing.T, ctx context.Context, cli *client.Client, tag, netName string, labels map[string]string, name string, g Grant) container.CreateResponse {
	t.Helper()
	const caPath = "/etc/aimi/git-ca.pem"
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:     tag,
		Labels:    labels,
		OpenStdin: true, StdinOnce: false, AttachStdin: true,
		Env: []string{"AIMI_AGENT=demo", "AIMI_GIT_TOKEN=" + g.Token,
			"GIT_SSL_CAINFO=" + caPath}, // as the orchestrator sets it: git only
	}, &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: g.CAFile, Target: caPath, ReadOnly: true}},
	}, nil, nil, name)
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	return created
}
