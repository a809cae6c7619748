package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/google/uuid"
)

// buildRunner builds the static binary the way the image gets it.
func buildRunner(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "acp-runner")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build acp-runner: %v\n%s", err, out)
	}
	return bin
}

const taskFile = `{
  "schemaVersion": "3.0",
  "metadata": {"title": "feat: stop", "type": "feat", "branchName": "feat/stop", "createdAt": "2026-11-20", "planPath": null, "maxConcurrency": 1},
  "userStories": [
    {"id": "US-001", "title": "Quick", "description": "d", "acceptanceCriteria": ["File one.txt exists"], "priority": 1, "status": "pending", "dependsOn": [], "notes": ""},
    {"id": "US-002", "title": "Slow", "description": "d", "acceptanceCriteria": ["File two.txt exists"], "priority": 2, "status": "pending", "dependsOn": ["US-001"], "notes": "[demo:slow]"}
  ]
}
`

// TestBinarySIGTERMMidStory runs the real binary with its own demo agent
// (acp-runner demo-agent as a subprocess), stops it with SIGTERM during the
// slow story, and checks the protocol lines, the exit and that no process of
// the agent's group is left.
func TestBinarySIGTERMMidStory(t *testing.T) {
	bin := buildRunner(t)
	srv := gittest.New(t, "tok", map[string]string{".aimi/tasks/stop-tasks.json": taskFile})
	ws := filepath.Join(t.TempDir(), "ws")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "AIMI_AGENT=demo", "AIMI_WORKSPACE="+ws, "AIMI_STOP_GRACE=5s",
		"AIMI_GIT_TOKEN=tok", "GIT_SSL_CAINFO="+srv.CAFile, "GIT_CONFIG_GLOBAL=/dev/null", "AIMI_LOG_LEVEL=debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{} // the slow part is waited for in it
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	req := acpmsg.NewMessage(acpmsg.TypeTaskRequest, uuid.NewString(), "0123456789ab", &acpmsg.TaskRequest{
		TaskFilePath: ".aimi/tasks/stop-tasks.json", BranchName: "feat/stop", RepoURL: srv.URL})
	line, err := acpmsg.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// stdin stays open, as with the daemon's attach: a closed stdin is not a
	// stop signal.
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs, signalled := stopAtTheSecondStory(t, ctx, cmd, stdout, stderr)
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !signalled {
		t.Fatalf("US-002 never started; stderr:\n%s", stderr.String())
	}
	last := msgs[len(msgs)-1]
	c, ok := last.Payload.(*acpmsg.Completion)
	if !ok || c.Status != acpmsg.CompletionStopped {
		t.Fatalf("last message %+v", last.Payload)
	}
	if strings.Contains(stderr.String(), "tok@") || strings.Contains(stderr.String(), "AIMI_GIT_TOKEN=tok") {
		t.Fatal("token in logs")
	}
	// The agent's process id is in the debug log; its group must be gone.
	checkAgentGroupGone(t, stderr.String())
	// US-001 is committed and pushed, US-002 is not.
	var f struct {
		UserStories []struct{ ID, Status string } `json:"userStories"`
	}
	if err := json.Unmarshal([]byte(srv.Show(t, "feat/stop", ".aimi/tasks/stop-tasks.json")), &f); err != nil {
		t.Fatal(err)
	}
	if f.UserStories[0].Status != "completed" || f.UserStories[1].Status != "pending" {
		t.Fatalf("pushed statuses %+v", f.UserStories)
	}
}

// stopAtTheSecondStory reads the runner's messages from stdout until it
// ends, sending SIGTERM once US-002 is in progress and its slow part has
// begun (stderr says so); it returns the messages and whether it signalled.
func stopAtTheSecondStory(t *testing.T, ctx context.Context, cmd *exec.Cmd, stdout io.Reader, stderr *syncbuf.Buffer) (msgs []acpmsg.Message, signalled bool) {
	t.Helper()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			m, err := acpmsg.ParseFromContainer([]byte(l))
			if err != nil {
				t.Fatalf("invalid line %q: %v", l, err)
			}
			msgs = append(msgs, m)
			if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok && p.StoryID == "US-002" && p.Status == acpmsg.StoryInProgress && !signalled {
				waitSlowPart(t, ctx, stderr)
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				signalled = true
			}
		case <-ctx.Done():
			t.Fatalf("timeout; stderr:\n%s", stderr.String())
		}
	}
	return msgs, signalled
}

// checkAgentGroupGone checks the process group of every agent the debug
// log says started is gone.
func checkAgentGroupGone(t *testing.T, stderr string) {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, `msg="agent started"`) {
			continue
		}
		i := strings.Index(l, " pid=")
		var pid int
		if _, err := fmt.Sscanf(l[i+5:], "%d", &pid); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("agent group %d still alive: %v", pid, err)
		}
	}
}

func TestBinaryBadInputIsOneErrorLine(t *testing.T) {
	bin := buildRunner(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "AIMI_WORKSPACE="+t.TempDir(), "AIMI_SWARM_ID="+uuid.NewString(), "AIMI_CONTAINER_ID=feedbeef0001")
	cmd.Stdin = strings.NewReader("not json\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v", err)
	}
	m, err := acpmsg.ParseFromContainer(out)
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if e := m.Payload.(*acpmsg.ErrorPayload); e.Code != acpmsg.CodeInvalidInput || m.ContainerID != "feedbeef0001" {
		t.Fatalf("%+v %+v", m, e)
	}
}

// waitSlowPart waits until the demo agent's debug log says its turn is in
// the slow part.
func waitSlowPart(t *testing.T, ctx context.Context, stderr *syncbuf.Buffer) {
	t.Helper()
	for !strings.Contains(stderr.String(), `msg="`+demoagent.LogSlow+`"`) {
		if ctx.Err() != nil {
			t.Fatalf("the demo agent never reached its slow part; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
