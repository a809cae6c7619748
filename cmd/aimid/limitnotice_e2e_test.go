package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/notify"
)

// TestLimitWaitIsNotifiedThroughTheDaemon: the real daemon, engine and
// runner, an agent that calls the model through the gateway, a provider
// that answers its first call 429 with retry-after, and a webhook: the
// webhook gets one limit-wait-started notice naming the provider, the
// repository, the container and a reset after the limited answer, at the
// time the limit was first seen (before it was sent); the story still
// completes.
func TestLimitWaitIsNotifiedThroughTheDaemon(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs a real container")
	}
	prov := &limitingProvider{limited: 1, retryAfter: "3", arrived: make(chan struct{})}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	name := "limnote-" + fmt.Sprintf("%x", sha256.Sum256([]byte(t.Name())))[:6]
	repo := limitRepo(t, name)
	hook := newHookReceiver(t)
	image := sandboxImage(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIMI_") {
			env = append(env, kv)
		}
	}
	cfg := "agent:\n  kind: acp\n  command: ./modelagent\n  limit_retries: 3\n  env:\n    ANTHROPIC_API_KEY: sk-ant-limit-test\ngit:\n  mode: local\nnotify:\n  webhooks: [" + hook.url + "/hooks/T0/B0/HOOKTOKEN]\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Base:     env,
		Env: []string{
			"AIMI_MODELS_ANTHROPIC_URL=" + up.URL, "AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m",
			"AIMI_SANDBOX_SWAP=256m", "AIMI_SANDBOX_CPUS=0.5", "AIMI_SANDBOX_PIDS=128",
			"AIMI_SWARM_STOP_GRACE=2s",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	started := time.Now()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 5*time.Minute, "the container exited", allExited)
	notices := hook.wait(t, []string{notify.KindLimitWait})
	p.stop(t)
	c := containerOf(t, validState(t, repo), name)
	var limits []notify.Notice
	for _, no := range decodeNotices(t, notices) {
		if no.Kind == notify.KindLimitWait {
			limits = append(limits, no)
		}
	}
	if len(limits) != 1 {
		t.Fatalf("limit notices %+v: want one", limits)
	}
	no := limits[0]
	if no.Repo == "" || filepath.Base(no.Repo) != filepath.Base(repo) || !strings.HasPrefix(no.Text, filepath.Base(repo)+": ") {
		t.Errorf("notice %+v: want repository %s", no, repo)
	}
	// The reset is 3 s (retry-after) after the limited answer: a notice
	// timed when it was sent (limitBatch later) would be 1 s before it.
	if no.Time.Before(started) || no.Until.Sub(no.Time) < 2500*time.Millisecond {
		t.Errorf("notice time %v, reset %v: want when the limit was first seen, 3 s before its reset", no.Time, no.Until)
	}
	if no.Provider != "anthropic" || strings.Join(no.Containers, ",") != c.ContainerName || no.Until.Before(started) || no.SwarmID == "" ||
		!strings.Contains(no.Text, "anthropic is limited until") {
		t.Errorf("notice %+v: want anthropic, container %s and a reset", no, c.ContainerName)
	}
	if c.StoryProgress.Completed != 1 {
		t.Errorf("container %s: %s %+v, want its story completed", c.ContainerName, c.Status, c.StoryProgress)
	}
}

func decodeNotices(t *testing.T, bodies []string) []notify.Notice {
	t.Helper()
	var out []notify.Notice
	for _, b := range bodies {
		var no notify.Notice
		if err := json.Unmarshal([]byte(b), &no); err != nil {
			t.Fatalf("notice %q: %v", b, err)
		}
		out = append(out, no)
	}
	return out
}

func (h *hookReceiver) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}
