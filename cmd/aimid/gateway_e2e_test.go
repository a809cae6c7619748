package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// fakeProvider answers like the Anthropic Messages API, JSON or SSE, and
// only to the real key in x-api-key.
func fakeProvider(t *testing.T, key string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key || r.URL.Path != "/v1/messages" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{"message_start", "content_block_delta", "message_stop"} {
			fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q}\n\n", ev, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestModelKeyStaysInTheDaemon runs two sandboxes whose agent.env holds
// ANTHROPIC_API_KEY. Each calls the model (JSON and a stream) through the
// gateway and succeeds, then searches /proc/*/environ, /proc/*/cmdline and
// every readable file for the real key and finds none. A placeholder used
// from the other sandbox is refused.
func TestModelKeyStaysInTheDaemon(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key, up, cfg := probeKey(t)
	image := dockertest.BuildGoImage(t, ctx, map[string]string{"/probe": "github.com/aimi-tools/swarm/gateway/internal/probeagent"}, nil, nil)
	repo := gitRepo(t, 1, "one", "two")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Image:    image,
		Env:      []string{"GW_TEST_KEY=" + key, "AIMI_MODELS_ANTHROPIC_URL=" + up.URL},
	})
	run, answers := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "both containers running", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 2 && v.State.Containers[0].Status == state.StatusRunning && v.State.Containers[1].Status == state.StatusRunning
	})
	cli := dockertest.Client(t)
	one, two := v.State.ContainerForTask(taskPath("one")), v.State.ContainerForTask(taskPath("two"))
	if one == nil || two == nil {
		t.Fatalf("containers by task file: %+v", v.State.Containers)
	}
	for _, c := range []*state.Container{one, two} {
		verdict := waitProbe(t, ctx, cli, c.ContainerID)
		if verdict != "OK" {
			t.Errorf("%s: %s", c.ContainerName, verdict)
		}
	}
	e1, e2 := containerEnv(t, ctx, cli, one.ContainerID), containerEnv(t, ctx, cli, two.ContainerID)
	if e1["ANTHROPIC_API_KEY"] == key || e1["ANTHROPIC_API_KEY"] == e2["ANTHROPIC_API_KEY"] {
		t.Fatal("the sandboxes do not hold placeholders of their own")
	}
	// The other sandbox's placeholder is refused; its own, through the
	// same command, is accepted.
	if got := execIn(t, ctx, cli, two.ContainerID, "/probe", "call", e2["ANTHROPIC_BASE_URL"], e1["ANTHROPIC_API_KEY"]); got != "401" {
		t.Errorf("a placeholder from another sandbox: %q, want 401", got)
	}
	if got := execIn(t, ctx, cli, two.ContainerID, "/probe", "call", e2["ANTHROPIC_BASE_URL"], e2["ANTHROPIC_API_KEY"]); got != "200" {
		t.Errorf("the sandbox's own placeholder: %q, want 200", got)
	}
	execIn(t, ctx, cli, one.ContainerID, "/probe", "release")
	waitFor(t, sock, repo, 3*time.Minute, "one finished", func(v api.SwarmView) bool {
		c := v.State.ContainerForTask(taskPath("one"))
		return c != nil && c.Status.Terminal()
	})
	// Its container ended: its placeholder is revoked (from anywhere).
	testwait.Eventually(t, time.Minute, "the ended container's placeholder revoked", func() error {
		got := execIn(t, ctx, cli, two.ContainerID, "/probe", "call", e2["ANTHROPIC_BASE_URL"], e1["ANTHROPIC_API_KEY"])
		grants, _ := os.ReadFile(filepath.Join(dir, "data", "gateway", "grants.json"))
		if got != "401" || bytes.Contains(grants, []byte(`"`+one.ContainerName+`"`)) {
			return fmt.Errorf("still granted: %q\n%s", got, grants)
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	execIn(t, ctx, cli, two.ContainerID, "/probe", "release")
	waitFor(t, sock, repo, 3*time.Minute, "all finished", allExited)
	p.stop(t)
	checkNoKeyOrPlaceholderLeft(t, p.logs(), *answers, repo, key, e1["ANTHROPIC_API_KEY"], e2["ANTHROPIC_API_KEY"])
}

// checkNoKeyOrPlaceholderLeft checks none of secrets (the model key and
// the sandboxes' placeholders) is in the daemon's log logs, in the CLI's
// answers or in a file under repo's .aimi: each is read by people and
// tools the key must not reach.
func checkNoKeyOrPlaceholderLeft(t *testing.T, logs string, answers []string, repo string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Error("the daemon's log holds a key or placeholder")
		}
		for _, a := range answers {
			if strings.Contains(a, s) {
				t.Error("a CLI answer holds a key or placeholder")
			}
		}
		filepath.WalkDir(filepath.Join(repo, ".aimi"), func(path string, d os.DirEntry, err error) error {
			if b, _ := os.ReadFile(path); err == nil && !d.IsDir() && bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a key or placeholder", path)
			}
			return nil
		})
	}
}

// waitProbe waits for the probe's verdict in container id.
func waitProbe(t *testing.T, ctx context.Context, cli *client.Client, id string) string {
	t.Helper()
	for ctx.Err() == nil {
		if out, code := execCode(t, ctx, cli, id, "/probe", "report"); code == 0 {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no verdict from the probe in %s", id)
	return ""
}

func execIn(t *testing.T, ctx context.Context, cli *client.Client, id string, cmd ...string) string {
	t.Helper()
	out, _ := execCode(t, ctx, cli, id, cmd...)
	return out
}

// execCode runs cmd in container id and returns its stdout (trimmed) and
// exit code.
func execCode(t *testing.T, ctx context.Context, cli *client.Client, id string, cmd ...string) (string, int) {
	t.Helper()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	defer att.Close()
	var out, errb bytes.Buffer
	stdcopy.StdCopy(&out, &errb, att.Reader)
	insp, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return strings.TrimSpace(out.String()), insp.ExitCode
}
