package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/usage"
)

// usageProvider answers like the Anthropic Messages API with usage blocks:
// a JSON answer and a stream whose message_delta updates the output count.
func usageProvider(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(usageAnswers))
	t.Cleanup(srv.Close)
	return srv
}

// usageAnswers are usageProvider's answers.
func usageAnswers(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":7}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":25,"cache_read_input_tokens":2000,"cache_creation_input_tokens":100,"output_tokens":1}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	} {
		fmt.Fprint(w, ev+"\n\n")
		w.(http.Flusher).Flush()
	}
}

// usageTokens and usageCost are what the callagent's two calls of
// usageAnswers add up to at runCallagent's prices.
var (
	usageTokens = usage.Usage{Input: 35, Output: 35, CacheRead: 2005, CacheWrite: 107}
	usageCost   = (35*3 + 35*15 + 2005*0.3 + 107*3.75) / 1e6
)

// TestUsageOfModelCallsThroughTheGateway: the real daemon and engine, a
// sandbox that calls a fake provider through the model gateway (a JSON
// answer and a stream). `aimi swarm usage --json` reports the tokens the
// provider reported, once each, on the story that made the calls, and
// their cost at the configured prices.
func TestUsageOfModelCallsThroughTheGateway(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, rep, out := runCallagent(t, ctx, usageProvider(t))
	if len(rep.Containers) != 1 || len(rep.Containers[0].Stories) != 1 || rep.Containers[0].Stories[0].Story != "US-001" {
		t.Errorf("per story: %s", out)
	}
	if code, out, _ := run("swarm", "usage"); code != 0 || !bytes.Contains([]byte(out), []byte("US-001")) || !bytes.Contains([]byte(out), []byte("TOTAL")) {
		t.Errorf("usage: exit %d\n%s", code, out)
	}
}

// runCallagent runs one sandbox of the callagent image against the
// provider up, checks that `aimi swarm usage --json` reports the
// callagent's two calls with usageTokens at usageCost, and returns the
// CLI, the report and its JSON.
func runCallagent(t *testing.T, ctx context.Context, up *httptest.Server) (func(args ...string) (int, string, string), cli.UsageReport, string) {
	t.Helper()
	image := dockertest.BuildGoImage(t, ctx, map[string]string{"/callagent": "github.com/aimi-tools/swarm/usage/internal/callagent"}, nil, nil)
	repo := gitRepo(t, 1, "spender")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	cfg := "agent:\n  env:\n    ANTHROPIC_API_KEY: sk-ant-usage-test\n" +
		"models:\n  anthropic:\n    prices: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   cfg,
		LogLevel: "debug",
		Image:    image,
		Env:      []string{"AIMI_MODELS_ANTHROPIC_URL=" + up.URL},
	})
	t.Cleanup(func() { p.stop(t) })
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	code, out, errOut := run("swarm", "usage", "--json")
	if code != 0 {
		t.Fatalf("usage: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep cli.UsageReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, out)
	}
	if rep.Total.Calls != 2 || rep.Total.Tokens != usageTokens || math.Abs(rep.Total.Cost-usageCost) > 1e-12 {
		var logs string
		if len(rep.Containers) == 1 {
			_, logs, _ = run("swarm", "logs", rep.Containers[0].Name)
		}
		t.Fatalf("total %+v, want 2 calls, %+v, cost %v\n%s\nthe agent's logs (its completion names failed calls):\n%s", rep.Total, usageTokens, usageCost, out, logs)
	}
	return run, rep, out
}
