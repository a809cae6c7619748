// Command callagent stands in for acp-runner in the usage tests: it reads
// the task-request, starts story US-001, calls the model through the
// gateway (ANTHROPIC_BASE_URL with the placeholder in ANTHROPIC_API_KEY)
// once with a JSON answer and once streamed, and completes the story and
// the run. It is built into a FROM-scratch test image; it never runs in
// production.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	aimirunner "github.com/aimi-tools/swarm/runner"
	"github.com/aimi-tools/swarm/runner/forward"
)

func main() {
	if err := aimirunner.LoadSecretEnv(os.Getenv, os.Setenv, contract.SecretDir); err != nil {
		fmt.Fprintln(os.Stderr, "callagent:", err)
		os.Exit(2)
	}
	// As acp-runner does: a sandbox without a network reaches the model
	// gateway only through these loopback forwards to its own sockets.
	if _, err := forward.FromEnv(context.Background(), os.Getenv, slog.Default()); err != nil {
		fmt.Fprintln(os.Stderr, "callagent:", err)
		os.Exit(2)
	}
	src, err := aimirunner.RequestInput(os.Getenv, os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "callagent:", err)
		os.Exit(2)
	}
	line, _ := bufio.NewReader(src).ReadBytes('\n')
	var req struct {
		SwarmID     string `json:"swarmId"`
		ContainerID string `json:"containerId"`
	}
	json.Unmarshal(line, &req)
	emit := func(t acpmsg.Type, p acpmsg.Payload) {
		b, _ := json.Marshal(acpmsg.NewMessage(t, req.SwarmID, req.ContainerID, p))
		os.Stdout.Write(append(b, '\n'))
	}
	emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: "US-001", Status: acpmsg.StoryInProgress, Output: "calling the model"})
	var errs []string
	for _, stream := range []bool{false, true} {
		if code, err := post(os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY"), stream); err != nil || code != 200 {
			errs = append(errs, fmt.Sprintf("call (stream %v): %d %v", stream, code, err))
		}
	}
	// The gateway journals a call as its answer ends; the story's end
	// goes through the engine's log. Leave the calls their moment.
	time.Sleep(2 * time.Second)
	emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: "US-001", Status: acpmsg.StoryCompleted, Output: "called the model twice"})
	if errs == nil {
		errs = []string{}
	}
	emit(acpmsg.TypeCompletion, &acpmsg.Completion{Status: "completed", Errors: errs})
}

// post sends one Messages API call; Go's TLS reads SSL_CERT_FILE.
func post(base, key string, stream bool) (int, error) {
	body := fmt.Sprintf(`{"model":"claude-test","max_tokens":8,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(base, "/")+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, err
}
