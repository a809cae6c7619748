package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// TestSwarmBackendUnpushedWorkIsKeptByName: the real daemon on the swarm
// backend in local git mode, the real runner and an exec agent whose first
// story's push arrives and whose second story's push the git service
// refuses (git.max_push). The container ends failed with GIT_PUSH_FAILED.
// The daemon cannot read a task container's files on this backend, so:
// fetch says it cannot take the commits, and where they are; cleanup
// without --force keeps the container saying why (the one push that did
// arrive does not make the later commits received); a new start of the
// task file is refused rather than replacing it; cleanup --force removes
// it, listing it as lost; and the next start gets the container's own
// name, not a suffixed one.
func TestSwarmBackendUnpushedWorkIsKeptByName(t *testing.T) {
	parallelCluster(t)
	image := sandboxImage(t)
	c := testCluster(t, image)
	name := "unpushed-" + dockertest.RunID()[:6]
	repo := historyRepo(t, 0, 0, name)
	writeCommitted(t, repo, name, taskFileJSON("feat/"+name, 2))
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "git:\n  mode: local\n"
	agent := `case "$AIMI_STORY_ID" in US-001) echo small > "$AIMI_STORY_ID.txt" ;; *) head -c 9000000 /dev/urandom > "$AIMI_STORY_ID.bin" ;; esac`
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    cleanEnv(),
		Env: append(swarmSettings(c, image),
			"AIMI_GIT_MAX_PUSH=8m", "AIMI_GIT_MAX_MIRROR=12m", "AIMI_AGENT_KIND=exec", "AIMI_AGENT_COMMAND="+agent),
	})
	defer p.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := func(args ...string) (int, string, string) {
		code, out, errOut := aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
		t.Logf("aimi %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		return code, out, errOut
	}
	if code, _, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 5*time.Minute, "the container ended", func(v api.SwarmView) bool {
		return len(v.Containers) == 1 && allExited(v)
	})
	d := v.Containers[0]
	errs, _ := json.Marshal(d.Errors)
	if d.Status != "failed" || !strings.Contains(string(errs), "GIT_PUSH_FAILED") {
		t.Fatalf("%s ended %s with errors %s; want failed with GIT_PUSH_FAILED\ndaemon log:\n%s", d.Name, d.Status, errs, tail(p.logs(), 4000))
	}
	want := d.Name

	_, out, errOut := run("swarm", "fetch")
	if !strings.Contains(out+errOut, "Swarm") || !strings.Contains(out+errOut, "node") {
		t.Errorf("fetch: want it to say the commits cannot be read on the Swarm backend and on which node they are")
	}
	code, out, _ := run("swarm", "cleanup")
	if code != 0 || !strings.Contains(out, "kept "+want+": its last push never arrived") || strings.Contains(out, "removed: "+want) {
		t.Fatalf("cleanup: exit %d; want %s kept (its last push never arrived)", code, want)
	}
	if code, _, errOut := run("swarm", "start", "--all", "--local"); code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("a new start: exit %d; want it refused naming %s, whose commits nobody received", code, want)
	}
	code, out, _ = run("swarm", "cleanup", "--force")
	if code != 0 || !strings.Contains(out, "LOST "+want) {
		t.Fatalf("cleanup --force: exit %d; want %s removed and listed as lost", code, want)
	}
	if code, _, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start after cleanup --force: exit %d %s", code, errOut)
	}
	v = waitFor(t, sock, repo, 5*time.Minute, "the second container ended", func(v api.SwarmView) bool {
		return len(v.Containers) == 1 && allExited(v)
	})
	if got := v.Containers[0].Name; got != want {
		t.Errorf("the start after cleanup --force named the container %s, want %s again", got, want)
	}
	if code, _, _ := run("swarm", "cleanup", "--force"); code != 0 {
		t.Errorf("final cleanup --force: exit %d", code)
	}
}
