package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/swarmmode"
)

// TestSwarmBackendAgentCannotReadTheGitToken: on the swarm backend the git
// token reaches the runner as a Swarm secret file; an exec agent (the
// sandbox image's user) that tries to read that file gets "Permission
// denied", while the run itself (clone and push with the token) completes.
// What the agent saw is committed by the runner and read from the branch.
func TestSwarmBackendAgentCannotReadTheGitToken(t *testing.T) {
	parallelCluster(t)
	image := sandboxImage(t)
	c := testCluster(t, image)
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	name := "tok-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	branch := "feat/" + name
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), taskFileJSON(branch, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	agent := "AIMI_AGENT_COMMAND={ id -u; ls -ln " + contract.SecretDir + "; cat " + contract.SecretDir + "/" + contract.EnvGitToken + "; } > probe.txt 2>&1; true"
	env := append(swarmSettings(c, image), "AIMI_AGENT_KIND=exec", agent)
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Config: "git:\n  mode: local\n", Base: cleanEnv(), Env: env})
	defer p.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, clusterWork, "the container exited", allExited)
	testwait.Eventually(t, 3*time.Minute, "probe.txt on "+branch, func() error {
		if exec.Command("git", "-C", repo, "cat-file", "-e", branch+":probe.txt").Run() != nil {
			return fmt.Errorf("not there; containers: %+v", view.Containers)
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
	probe := gitOut(t, repo, "show", branch+":probe.txt")
	t.Logf("what the agent saw:\n%s", probe)
	first, rest, _ := strings.Cut(probe, "\n")
	if first != "1000" {
		t.Errorf("the agent ran as uid %q, want the image's user 1000", first)
	}
	if !strings.Contains(rest, "Permission denied") {
		t.Errorf("the agent read %s/%s:\n%s", contract.SecretDir, contract.EnvGitToken, probe)
	}
	for _, d := range view.Containers {
		if d.Status != "completed" {
			t.Errorf("%s: %s %+v", d.Name, d.Status, d.Errors)
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	eng, err := swarmmode.New(cctx, c.Manager().Client, swarmmode.Options{Instance: testInstance(sock), NodeHost: c.NodeHostTemplate()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range view.Containers {
		_ = eng.Remove(cctx, d.ContainerID)
	}
}
