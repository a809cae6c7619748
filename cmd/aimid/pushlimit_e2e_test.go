package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// TestPushOverGitMaxPushIsRefusedAndReported: the real daemon in local git
// mode with git.max_push 8m and git.max_mirror 12m, the real runner and an
// exec agent whose first story commits 1 MB and whose second commits 20 MB.
// The first push goes through; the second is refused by the git service
// with a message naming git.max_push, which the runner reports in the
// container's errors and its journal, and the service's own report is a
// git-refused record counted in the view; the swarm's mirror holds the first
// story and nothing of the second, and grew by less than git.max_mirror.
func TestPushOverGitMaxPushIsRefusedAndReported(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	name := "big-" + dockertest.RunID()[:6]
	repo := historyRepo(t, 0, 0, name)
	writeCommitted(t, repo, name, taskFileJSON("feat/"+name, 2))

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: dataDir,
		Image:   image,
		Local:   true,
		Env: []string{
			"AIMI_GIT_MAX_PUSH=8m", "AIMI_GIT_MAX_MIRROR=12m", "AIMI_AGENT_KIND=exec",
			`AIMI_AGENT_COMMAND=case "$AIMI_STORY_ID" in US-001) n=1000000 ;; *) n=20000000 ;; esac; head -c $n /dev/urandom > "$AIMI_STORY_ID.bin"`,
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 5*time.Minute, "the container exited", allExited)
	if len(v.Containers) != 1 {
		t.Fatalf("containers: %+v", v.Containers)
	}
	d := v.Containers[0]
	errs, _ := json.Marshal(d.Errors)
	if d.Status == string(state.StatusCompleted) || !strings.Contains(string(errs), "the git service refused it: aimi: push refused") || !strings.Contains(string(errs), "git.max_push") {
		t.Errorf("%s ended %s with errors %s; want its refused push reported, naming git.max_push\ndaemon log:\n%s", d.Name, d.Status, errs, tail(p.logs(), 4000))
	}
	t.Logf("%s: %s, errors %s", d.Name, d.Status, errs)

	sw := validState(t, repo)
	journal, err := os.ReadFile(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, sw.Containers[0].ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(journal), "git.max_push") {
		t.Error("the refusal is not in the container's journal")
	}
	// The service's own report, not only the runner's: a git-refused
	// daemon record, counted in the view.
	refused := 0
	for line := range strings.Lines(string(journal)) {
		var r state.Record
		if json.Unmarshal([]byte(line), &r) == nil && r.Stream == state.StreamDaemon && r.Type == state.TypeGitRefused {
			refused++
			if !strings.Contains(r.Reason, "git.max_push") {
				t.Errorf("git-refused record %q does not name git.max_push", r.Reason)
			}
		}
	}
	if refused == 0 || d.GitRefused != refused {
		t.Errorf("%d git-refused records in the journal, view counts %d; want at least one, the same", refused, d.GitRefused)
	}

	mirror := filepath.Join(dataDir, "git", "repos", sw.SwarmID+".git")
	branch := "refs/heads/feat/" + name
	if err := exec.Command("git", "-C", mirror, "cat-file", "-e", branch+":US-001.bin").Run(); err != nil {
		t.Errorf("the first story's push (1 MB, under the limit) is not in the mirror: %v", err)
	}
	if err := exec.Command("git", "-C", mirror, "cat-file", "-e", branch+":US-002.bin").Run(); err == nil {
		t.Error("the refused 20 MB push reached the mirror")
	}
	grew := mirrorGrowth(t, mirror)
	t.Logf("the mirror grew by %d bytes", grew)
	if grew > 12<<20 {
		t.Errorf("the mirror grew by %d bytes, past git.max_mirror (12 MiB)", grew)
	}
}

// mirrorGrowth is what pushes added to the git service's mirror: its size
// less the base it records.
func mirrorGrowth(t testing.TB, mirror string) int64 {
	t.Helper()
	var size int64
	filepath.Walk(mirror, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	b, err := os.ReadFile(filepath.Join(mirror, "aimi-base-bytes"))
	if err != nil {
		// Before bases were kept: all of it.
		return size
	}
	base, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return size - base
}
