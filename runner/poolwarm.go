package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	acp "github.com/coder/acp-go-sdk"
)

// claimWrites are the directories of a workspace image's workspace that a
// claim writes into (the origin in .git/config, the difference's pack and
// index, the branch's ref, the task file): on the sandbox's copy-on-write
// root the first write into each copies it up, a round trip to the storage
// driver's daemon per directory, which a claimed sandbox should not pay.
var claimWrites = []string{".", ".git", ".git/objects", ".git/objects/pack", ".git/refs", ".git/refs/heads", ".aimi", ".aimi/tasks"}

// WarmUp is a warm-pool sandbox's preparation while it waits for its
// claim (contract.EnvWarm): what a claim would otherwise do first on the
// cores every claimed sandbox shares. It copies up the directories a claim
// writes into (tmpDir, where the claim's files go, and those of the
// image's workspace), reads the workspace's index once (into the page
// cache), and fills encoding/json's caches of the messages the runner
// decodes. Nothing is left behind; every step is best effort, a failure
// only leaves the work to the claim.
func WarmUp(getenv func(string) string, tmpDir string) {
	if getenv(contract.EnvWarm) != "1" {
		return
	}
	copyUp(tmpDir, ".")
	if ws := getenv(contract.EnvWorkspace); ws != "" && getenv(contract.EnvWorkspaceBase) != "" {
		copyUp(ws, claimWrites...)
		// .git is the image build's clone, not the repository's content.
		git := filepath.Join(ws, ".git")
		_, _ = gitref.SharedIndex(git)
		_, _ = os.ReadFile(filepath.Join(git, "index"))
	}
	// A request of the daemon's shape through the parser and validator
	// the claim's own goes through (their caches are filled on first use).
	if line, err := warmRequest(); err == nil {
		_, _, _ = acpmsg.ParseTaskRequest(line)
	}
	_, _ = parseTaskFile([]byte(`{"userStories":[{}]}`))
	// The agent's first exchanges (encoding/json builds a type's coder on
	// its first use, tens of microseconds each).
	for _, v := range []any{&acp.InitializeRequest{}, &acp.InitializeResponse{}, &acp.NewSessionRequest{},
		&acp.NewSessionResponse{}, &acp.PromptRequest{}, &acp.PromptResponse{}, &acp.SessionNotification{},
		acpmsg.NewMessage(acpmsg.TypeProgressUpdate, "", "", &acpmsg.ProgressUpdate{})} {
		if b, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(b, v)
		}
	}
}

// copyUp makes the copies of root's directories dirs in the sandbox's
// writable layer (a file made and removed in each). The workspace's tree
// is the repository's, links included, and the runner is still root here:
// everything goes through an os.Root, so a link never takes the write out
// of root.
func copyUp(root string, dirs ...string) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return
	}
	defer r.Close()
	for _, dir := range dirs {
		if fi, err := r.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf(".aimi-warm-%d", os.Getpid()))
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			continue
		}
		f.Close()
		_ = r.Remove(name)
	}
}

// warmRequest is a valid task-request of no swarm, for WarmUp.
func warmRequest() ([]byte, error) {
	return json.Marshal(acpmsg.Message{Type: acpmsg.TypeTaskRequest, Timestamp: "2026-01-01T00:00:00Z",
		SwarmID: "00000000-0000-4000-8000-000000000000", ContainerID: "aimi-warm",
		Payload: &acpmsg.TaskRequest{TaskFilePath: ".aimi/tasks/warm-tasks.json", BranchName: "feat/warm",
			RepoURL: "https://127.0.0.1/warm.git", EnvVars: map[string]string{"AIMI_WARM_X": "1"}}})
}
