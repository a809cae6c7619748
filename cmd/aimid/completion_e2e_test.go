package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/state"
)

// TestCompletionTheStoriesDoNotBackFailsTheContainer runs, on the real
// daemon and engine, a container that claims completion completed without
// a single story done next to one that does its work: the claim is
// journaled as rejected with its code and reason, the daemon's error with
// that code follows it, the container ends failed with its stories as they
// were, and start --follow exits non-zero.
func TestCompletionTheStoriesDoNotBackFailsTheContainer(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 4, "liar", "honest")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT":                  "pace|20ms;auto|4",
			"STANDIN_SCRIPT__LIAR_TASKS_JSON": "complete|completed|-",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)

	code, out, errOut := run("swarm", "start", "--all", "--follow")
	if code != cli.ExitInvalid || !strings.Contains(errOut, "1 container(s) failed") {
		t.Fatalf("start --follow: exit %d (want %d: the liar fails)\n%s\n%s", code, cli.ExitInvalid, out, errOut)
	}
	p.stop(t)
	sw := validState(t, repo)
	liar, honest := sw.ContainerForTask(taskPath("liar")), sw.ContainerForTask(taskPath("honest"))
	if liar == nil || honest == nil {
		t.Fatalf("containers: %+v", sw.Containers)
	}
	if liar.Status != state.StatusFailed || liar.StoryProgress != (state.Progress{Total: 4, Pending: 4}) {
		t.Errorf("liar: %s %+v, want failed with 4 pending", liar.Status, liar.StoryProgress)
	}
	if honest.Status != state.StatusCompleted || honest.StoryProgress.Completed != 4 {
		t.Errorf("honest: %s %+v, want completed 4/4", honest.Status, honest.StoryProgress)
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, liar.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var rejected, daemonErr bool
	for _, r := range recs {
		if r.Type == "completion" && r.Stream == state.StreamStdout &&
			strings.Contains(r.Rejected, state.CodeCompletionContradicts) && strings.Contains(r.Rejected, "4 of 4 stories") {
			rejected = true
		}
		if r.Stream == state.StreamDaemon && r.Type == "error" {
			var m struct {
				Payload struct{ Code, Message string } `json:"payload"`
			}
			if json.Unmarshal(r.Message, &m) == nil && m.Payload.Code == state.CodeCompletionContradicts && strings.Contains(m.Payload.Message, "US-001 pending") {
				daemonErr = true
			}
		}
	}
	if !rejected || !daemonErr {
		for _, r := range recs {
			t.Logf("seq=%d stream=%s type=%s rejected=%q message=%s", r.Seq, r.Stream, r.Type, r.Rejected, r.Message)
		}
		t.Fatalf("journal: rejected completion with its code %v, daemon error with the code %v", rejected, daemonErr)
	}
}
