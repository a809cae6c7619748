package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// stallAgent is an ACP agent in sh: its first turn says one thing and
// then nothing (a stall), the next one writes a file and ends the turn.
// session/cancel ends the pending turn as cancelled, as ACP asks.
const stallAgent = `#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | grep -o '"id":[0-9]*' | head -n 1 | cut -d: -f2)
  case "$line" in
  *'"method":"initialize"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":1,"agentCapabilities":{}}}' ;;
  *'"method":"session/new"'*) echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"sessionId":"s1"}}' ;;
  *'"method":"session/prompt"'*)
    prompt=$id
    echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"thinking. "}}}}'
    if [ -e /tmp/stalled-once ]; then
      echo done > story.txt
      echo '{"jsonrpc":"2.0","id":'"$prompt"',"result":{"stopReason":"end_turn"}}'
    else
      touch /tmp/stalled-once
    fi ;;
  *'"method":"session/cancel"'*) echo '{"jsonrpc":"2.0","id":'"$prompt"',"result":{"stopReason":"cancelled"}}' ;;
  esac
done
`

// TestStalledAgentIsCancelledAndRetriedThroughTheDaemon: the real daemon
// and engine, the real runner in the sandbox image and an ACP agent whose
// first turn stalls. With agent.stall_timeout at 3s the runner cancels the
// turn, journals the evidence, and the retry completes the story.
func TestStalledAgentIsCancelledAndRetriedThroughTheDaemon(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs a real container")
	}
	image := sandboxImage(t)
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	name := "stall-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), taskFileJSON("feat/"+name, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "stall-agent.sh"), []byte(stallAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task file and agent")
	removeProjectContainersAtEnd(t, repo)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=acp", "AIMI_AGENT_COMMAND=sh stall-agent.sh", "AIMI_AGENT_STALL_TIMEOUT=3s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 5*time.Minute, "the container exited", allExited)
	p.stop(t)
	sw := validState(t, repo)
	c := sw.ContainerForTask(taskPath(name))
	if c == nil || c.Status != state.StatusCompleted || c.StoryProgress.Completed != 1 {
		t.Fatalf("container %+v, want completed 1/1", c)
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		m := string(r.Message)
		if r.Type == "progress-update" && strings.Contains(m, "stalled: no ACP traffic for") && strings.Contains(m, "retrying the story once") {
			return
		}
	}
	for _, r := range recs {
		t.Logf("seq=%d stream=%s type=%s message=%s", r.Seq, r.Stream, r.Type, r.Message)
	}
	t.Fatal("the journal has no progress-update with the stall's evidence and the retry")
}
