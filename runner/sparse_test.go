package runner

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// TestSparseDifferenceWritesOnlyTheOwnTaskFile: a sandbox of a workspace
// image (its workspace at base) starting a new branch at a tip that added
// two task files, a journal and a state file and changed a source file
// gets, from the real git service, a difference that writes its own task
// file and the source file but neither the other task file nor the
// daemon's files; git sees a clean work tree (the other
// file is skip-worktree, its own is not), and a commit of the runner's
// changes to its task file keeps the other one as the tip had it and
// pushes. The image's index is split as the service makes it (its shared
// part in the image): the difference's index is split against that part
// and smaller than it; an image whose index is whole gets the whole
// index.
func TestSparseDifferenceWritesOnlyTheOwnTaskFile(t *testing.T) {
	for _, split := range []bool{true, false} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) { sparseDifference(t, split) })
	}
}

func sparseDifference(t *testing.T, split bool) {
	repo, s := serviceRepo(t)
	g0, err := s.Grant(t.Context(), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-image", Branch: "feat/image"}, "")
	must(t, err)
	_, image := prepared(t, g0, "feat/image", true)
	base := gittest.Git(t, image, "rev-parse", "HEAD")
	// As the image holds it: the default branch, origin a placeholder.
	gittest.Git(t, image, "checkout", "-q", "-B", "main", base)
	gittest.Git(t, image, "remote", "set-url", "origin", contract.WorkspaceOrigin)
	shared, err := gitref.SharedIndex(filepath.Join(image, ".git"))
	if err != nil {
		t.Fatalf("the service's workspace holds no split index: %v", err)
	}
	if !split {
		// An image made before indexes were split: one whole index.
		gittest.Git(t, image, "update-index", "--no-split-index")
		must(t, os.Remove(filepath.Join(image, ".git", "sharedindex."+shared)))
	}

	own, other := tasksPath("a"), tasksPath("b")
	must(t, os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755))
	must(t, os.WriteFile(filepath.Join(repo, own), []byte(`{"own":true}`), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, other), []byte(`{"other":true}`), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("changed\n"), 0o644))
	// A repository without a .gitignore for the daemon's files commits
	// the last start's journal and state file with its task files.
	journal := ".aimi/swarm/s0/aimi-b.ndjson"
	must(t, os.MkdirAll(filepath.Join(repo, ".aimi", "swarm", "s0"), 0o755))
	must(t, os.WriteFile(filepath.Join(repo, journal), []byte("{}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, ".aimi", "swarm-state.json"), []byte("{}\n"), 0o644))
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "task files")
	tip := gittest.Git(t, repo, "rev-parse", "HEAD")

	g, err := s.Grant(t.Context(), contract.ContainerBranch{Repo: repo, Swarm: "sw1", Container: "aimi-a", Branch: "feat/a"}, "")
	must(t, err)
	cfg := Config{Workspace: image, WorkspaceBase: base, DaemonGit: true, GitToken: g.Token,
		GitUsername: DefaultGitUsername, CAFile: g.CAFile, AuthorName: "T", AuthorEmail: "t@example.com",
		PushRetry: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := &run{cfg: cfg, log: cfg.Logger, git: newGit(&cfg), req: &acpmsg.TaskRequest{RepoURL: g.RepoURL, BranchName: "feat/a", TaskFilePath: own}}
	must(t, r.git.connect(&cfg, g.RepoURL))
	t.Cleanup(r.git.close)
	how, err := r.fillPrefilled(t.Context())
	must(t, err)
	if how != "image+delta" {
		t.Fatalf("the workspace came %q, want image+delta", how)
	}
	if b, err := os.ReadFile(filepath.Join(image, own)); err != nil || string(b) != `{"own":true}` {
		t.Errorf("its own task file: %q %v", b, err)
	}
	for _, p := range []string{other, journal, ".aimi/swarm-state.json"} {
		if _, err := os.Lstat(filepath.Join(image, p)); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(image, "README.md")); string(b) != "changed\n" {
		t.Errorf("README.md = %q, want the tip's", b)
	}
	if now, _ := gitref.SharedIndex(filepath.Join(image, ".git")); split && now != shared {
		t.Errorf("the image's shared index is now %q, want %s", now, shared)
	}
	// git's link extension names the shared part the index is split
	// against.
	data, err := os.ReadFile(filepath.Join(image, ".git", "index"))
	must(t, err)
	oid, _ := hex.DecodeString(shared)
	if got := bytes.Contains(data, append([]byte("link"), 0, 0, 0)) && bytes.Contains(data, oid); got != split {
		t.Errorf("the index written (%d bytes) is split against %s: %v, want %v", len(data), shared, got, split)
	}
	if got := gittest.Git(t, image, "rev-parse", "HEAD"); got != tip {
		t.Errorf("HEAD %s, want the tip %s", got, tip)
	}
	if out := gittest.Git(t, image, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("git status: %q", out)
	}
	flags := gittest.Git(t, image, "ls-files", "-v", "--", own, other)
	if !strings.Contains(flags, "H "+own) || !strings.Contains(flags, "S "+other) {
		t.Errorf("ls-files -v: %q, want its own file tracked as usual and the other skip-worktree", flags)
	}
	must(t, os.WriteFile(filepath.Join(image, own), []byte(`{"own":"done"}`), 0o644))
	if ok, err := r.git.commitAll(t.Context(), "story"); !ok || err != nil {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if got := gittest.Git(t, image, "diff", "--name-only", "HEAD~1", "HEAD"); got != own {
		t.Errorf("the commit changed %q, want only its own task file", got)
	}
	if got := gittest.Git(t, image, "show", "HEAD:"+other); got != `{"other":true}` {
		t.Errorf("the other task file in the commit: %q", got)
	}
	gittest.Git(t, image, "fsck", "--strict")
	must(t, r.git.push(context.Background(), "feat/a", time.Minute))
}

func tasksPath(name string) string { return ".aimi/tasks/" + name + "-tasks.json" }
