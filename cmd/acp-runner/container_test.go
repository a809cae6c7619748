package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/sandboximage/sandboxtest"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
)

const diamondTasks = `{
  "schemaVersion": "3.0",
  "metadata": {"title": "feat: in a box", "type": "feat", "branchName": "feat/box", "createdAt": "2026-11-20", "planPath": null, "maxConcurrency": 2},
  "userStories": [
    {"id": "US-001", "title": "One", "description": "d", "acceptanceCriteria": ["File step-1.txt exists"], "priority": 1, "status": "pending", "dependsOn": [], "notes": ""},
    {"id": "US-002", "title": "Two", "description": "d", "acceptanceCriteria": ["File step-2.txt exists"], "priority": 2, "status": "pending", "dependsOn": ["US-001"], "notes": ""},
    {"id": "US-003", "title": "Three", "description": "d", "acceptanceCriteria": ["File step-3.txt exists"], "priority": 3, "status": "pending", "dependsOn": ["US-001"], "notes": ""}
  ]
}
`

// TestRunnerInSandboxImage runs the static binary as the entrypoint of the
// Debian-based sandbox image (unprivileged user, git, /workspace), with the
// demo agent, against an https git server on the host (host network; the
// server's CA is copied into the container). Stdin is attached and left
// open, as the daemon does. Every stdout line must validate, the branch must
// get one commit per story.
func TestRunnerInSandboxImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sandbox image")
	}
	cli := dockertest.Client(t)
	img := sandboxtest.Image(t)
	runID := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, runID)

	t.Run("diamond with the demo agent: valid lines, one pushed commit per story", func(t *testing.T) {
		srv := gittest.New(t, "box-token", map[string]string{".aimi/tasks/box-tasks.json": diamondTasks})
		msgs, code, stderr := runInContainer(t, cli, img, runID, srv, []string{"AIMI_AGENT=demo"})
		c, ok := msgs[len(msgs)-1].Payload.(*acpmsg.Completion)
		if !ok || c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 || code != 0 {
			t.Fatalf("final %+v exit %d; stderr:\n%s", msgs[len(msgs)-1].Payload, code, stderr)
		}
		commits := 0
		for _, l := range srv.Log(t, "feat/box") {
			if strings.HasPrefix(l, "US-") {
				commits++
			}
		}
		if commits != 3 {
			t.Fatalf("branch has %d story commits, want 3: %q", commits, srv.Log(t, "feat/box"))
		}
	})

	t.Run("the agent, same uid, cannot read the runner's environment", func(t *testing.T) {
		srv := gittest.New(t, "box-token", map[string]string{".aimi/tasks/box-tasks.json": diamondTasks})
		// exec agent: its shell's parent is the runner.
		msgs, _, stderr := runInContainer(t, cli, img, runID, srv, []string{"AIMI_AGENT=exec",
			`AIMI_AGENT_COMMAND=id -u; tr '\0' '\n' < /proc/$PPID/environ || echo "environ unreadable"; echo "token vars: $(env | grep -c '^AIMI_GIT_TOKEN=')"`})
		var first *acpmsg.ProgressUpdate
		for _, m := range msgs {
			if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok && p.Status != acpmsg.StoryInProgress {
				first = p
				break
			}
		}
		if first == nil || !strings.Contains(first.Output, "environ unreadable") || !strings.Contains(first.Output, "1000") || !strings.Contains(first.Output, "token vars: 0") {
			t.Fatalf("first story output %+v; stderr:\n%s", first, stderr)
		}
	})
}

// runInContainer runs the image with env against srv (host network; the
// server's CA copied in), attaches stdin and leaves it open as the daemon
// does, sends the task-request, waits for the exit and returns the parsed
// stdout lines (each must validate), the exit code and stderr. The token
// must appear nowhere in the output.
func runInContainer(t *testing.T, cli *client.Client, img, runID string, srv *gittest.Server, env []string) ([]acpmsg.Message, int64, string) {
	t.Helper()
	ca, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:     img,
		OpenStdin: true, StdinOnce: false, AttachStdin: true,
		Env:    append([]string{"AIMI_GIT_TOKEN=" + srv.Token, "GIT_SSL_CAINFO=/tmp/ca.pem"}, env...),
		Labels: map[string]string{dockertest.LabelKey: runID},
	}, &container.HostConfig{NetworkMode: "host"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	_ = tw.WriteHeader(&tar.Header{Name: "ca.pem", Mode: 0o644, Size: int64(len(ca))})
	_, _ = tw.Write(ca)
	_ = tw.Close()
	if err := cli.CopyToContainer(ctx, created.ID, "/tmp", &tarBuf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("copy CA: %v", err)
	}
	line, err := acpmsg.Marshal(acpmsg.NewMessage(acpmsg.TypeTaskRequest, uuid.NewString(), created.ID[:12], &acpmsg.TaskRequest{
		TaskFilePath: ".aimi/tasks/box-tasks.json", BranchName: "feat/box", RepoURL: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := dockertest.RunWithStdin(t, ctx, cli, created.ID, line)
	if strings.Contains(stdout+stderr, srv.Token) {
		t.Fatalf("token leaked into the container's output:\n%s\n%s", stdout, stderr)
	}
	var msgs []acpmsg.Message
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		m, err := acpmsg.ParseFromContainer(sc.Bytes())
		if err != nil {
			t.Fatalf("invalid line %q: %v\nstderr:\n%s", sc.Text(), err, stderr)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		t.Fatalf("no output (exit %d); stderr:\n%s", code, stderr)
	}
	return msgs, code, stderr
}
