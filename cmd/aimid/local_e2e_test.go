package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// The shapes of spec/fixtures/tasks/valid/2026-11-20-{linear,diamond}-tasks.json.
const (
	localLinearTasks = `{
  "schemaVersion": "3.0",
  "metadata": {"title": "feat: linear chain", "type": "feat", "branchName": "feat/linear", "createdAt": "2026-11-20", "planPath": null, "maxConcurrency": 1},
  "userStories": [
    {"id": "US-001", "title": "Story 1", "description": "As a developer, I want step 1 so that the feature grows.", "acceptanceCriteria": ["File step-1.txt exists", "Typecheck passes"], "priority": 1, "status": "pending", "dependsOn": [], "notes": ""},
    {"id": "US-002", "title": "Story 2", "description": "As a developer, I want step 2 so that the feature grows.", "acceptanceCriteria": ["File step-2.txt exists", "Typecheck passes"], "priority": 2, "status": "pending", "dependsOn": ["US-001"], "notes": ""},
    {"id": "US-003", "title": "Story 3", "description": "As a developer, I want step 3 so that the feature grows.", "acceptanceCriteria": ["File step-3.txt exists", "Typecheck passes"], "priority": 3, "status": "pending", "dependsOn": ["US-002"], "notes": ""}
  ]
}
`
	localDiamondTasks = `{
  "schemaVersion": "3.0",
  "metadata": {"title": "feat: diamond", "type": "feat", "branchName": "feat/diamond", "createdAt": "2026-11-20", "planPath": null, "maxConcurrency": 2},
  "userStories": [
    {"id": "US-001", "title": "Story 1", "description": "As a developer, I want step 1 so that the feature grows.", "acceptanceCriteria": ["File step-1.txt exists", "Typecheck passes"], "priority": 1, "status": "pending", "dependsOn": [], "notes": ""},
    {"id": "US-002", "title": "Story 2", "description": "As a developer, I want step 2 so that the feature grows.", "acceptanceCriteria": ["File step-2.txt exists", "Typecheck passes"], "priority": 2, "status": "pending", "dependsOn": ["US-001"], "notes": ""},
    {"id": "US-003", "title": "Story 3", "description": "As a developer, I want step 3 so that the feature grows.", "acceptanceCriteria": ["File step-3.txt exists", "Typecheck passes"], "priority": 3, "status": "pending", "dependsOn": ["US-001"], "notes": ""},
    {"id": "US-004", "title": "Story 4", "description": "As a developer, I want step 4 so that the feature grows.", "acceptanceCriteria": ["File step-4.txt exists", "Typecheck passes"], "priority": 4, "status": "pending", "dependsOn": ["US-002", "US-003"], "notes": ""}
  ]
}
`
)

func gitOut(t testing.TB, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestLocalModeSwarmWithTheRealRunnerEndToEnd: the real daemon in local git
// mode, the real sandbox image (acp-runner, demo agent) and a checkout with
// no origin. `aimi swarm start --all --local --follow` runs a linear and a
// diamond task file; the containers clone from the daemon's git service over
// https on the swarm network's gateway and push their branches story by
// story; the daemon publishes them into the checkout. Every journaled stdout
// line validates, each branch holds exactly one commit per story on top of
// the base, and neither a container's token nor the CA key appears in the
// state file, the journals, the CLI answers or the daemon's log. Cleanup
// then removes everything of the test's.
func TestLocalModeSwarmWithTheRealRunnerEndToEnd(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	started := time.Now()
	image := sandboxImage(t)
	t.Logf("sandbox image ready after %s", time.Since(started).Round(time.Second))

	repo, linear, diamond, base := localE2ECheckout(t)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	p := launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, answers := recordingAimi(ctx, repo, sock)

	swarmStart := time.Now()
	code, out, errOut := run("swarm", "start", "--all", "--local", "--follow")
	if code != 0 {
		t.Fatalf("start --all --local --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("swarm followed to the end in %s", time.Since(swarmStart).Round(time.Second))

	wantStories := map[string]int{"aimi-" + linear: 3, "aimi-" + diamond: 4}
	branches := map[string]string{"aimi-" + linear: "feat/linear", "aimi-" + diamond: "feat/diamond"}
	waitLocalPublished(t, p, sock, repo, branches)

	// The tokens the daemon generated: in each container's environment
	// (read through the Engine API before cleanup removes them).
	sw := validState(t, repo)
	if len(sw.Containers) != 2 {
		t.Fatalf("%d containers in the state file, want 2", len(sw.Containers))
	}
	eng := dockertest.Client(t)
	tokens, gateways := inspectLocalContainers(t, ctx, eng, sw)
	checkLocalState(t, sw, wantStories, branches)
	for _, c := range sw.Containers {
		checkLocalJournal(t, repo, sw, c, wantStories[c.ContainerName], gateways[c.ContainerName], c.ContainerName == "aimi-"+diamond)
	}
	checkLocalBranches(t, repo, base, branches, wantStories)
	code, out, errOut = run("swarm", "status")
	if code != 0 || !strings.Contains(out, "feat/linear") || !strings.Contains(out, "feat/diamond") {
		t.Errorf("status does not show the branches: exit %d\n%s\n%s", code, out, errOut)
	}

	// Leaks: the tokens and the CA key are in no log, answer, journal or
	// state file (nor anywhere else in the checkout or the daemon's data
	// dir, the CA key file itself excepted): files are scanned before
	// cleanup (journals and state present) and again at the end.
	leaks := newLeakScan(t, dataDir, tokens, repo)
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, "aimi-"+linear+".ndjson")); err != nil {
		t.Errorf("journal not found for the leak check: %v", err)
	}
	if n := leaks.scanFiles(); n == 0 {
		t.Error("no files scanned for leaks")
	}

	checkLocalCleanup(t, ctx, eng, run, repo, dataDir, sw, linear, diamond)
	p.stop(t)
	if _, err := os.Stat(sock); err == nil {
		t.Error("socket left after SIGTERM")
	}

	logText := p.logs()
	if !strings.Contains(logText, "container finished") {
		t.Errorf("the daemon log looks empty:\n%s", logText)
	}
	leaks.check("the daemon's log", logText)
	for _, a := range *answers {
		leaks.check("a CLI answer", a)
	}
	scanned := leaks.scanFiles()
	t.Logf("leak check: %d secrets in %d files, %d bytes of daemon log, %d CLI answers; total %s",
		len(leaks.secrets), scanned, len(logText), len(*answers)/2, time.Since(started).Round(time.Second))
}

// localE2ECheckout makes a fresh checkout with no origin: both task files
// committed on main. It returns the checkout, the two task files' names and
// the base commit.
func localE2ECheckout(t *testing.T) (repo, linear, diamond, base string) {
	t.Helper()
	repo = shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	// Container names are the engine's, global: a per-run suffix keeps
	// parallel runs (and other tests' linear/diamond files) apart.
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	linear, diamond = "linear-"+sfx, "diamond-"+sfx
	files := map[string]string{linear: localLinearTasks, diamond: localDiamondTasks}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("# local e2e\n"), 0o644)
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	base = gitOut(t, repo, "rev-parse", "HEAD")
	if out, err := exec.Command("git", "-C", repo, "remote").Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("the checkout must have no remote: %q %v", out, err)
	}
	removeProjectContainersAtEnd(t, repo)
	return repo, linear, diamond, base
}

// waitLocalPublished waits for every container to exit and every branch to
// be published into the checkout, and checks each container ended cleanly.
func waitLocalPublished(t *testing.T, p *proc, sock, repo string, branches map[string]string) {
	t.Helper()
	// --follow ends when every container is terminal by its completion
	// message; the process exit and the publication into the checkout come
	// a moment later.
	view := waitFor(t, sock, repo, 3*time.Minute, "every container exited", func(v api.SwarmView) bool {
		return len(v.Containers) == 2 && allExited(v)
	})
	waitBranchesPublished(t, repo, slices.Collect(maps.Values(branches)), time.Minute, p)
	for _, d := range view.Containers {
		// Rejected: no line was refused (stderr lines are log output).
		if *d.ExitCode != 0 || len(d.Errors) != 0 || d.Rejected != 0 {
			t.Errorf("%s: exit %d errors %+v rejected %d", d.Name, *d.ExitCode, d.Errors, d.Rejected)
		}
	}
}

// inspectLocalContainers checks each container's environment, network and
// exit through the Engine API; it returns the git tokens the daemon gave
// them and the address each reaches the git service on.
func inspectLocalContainers(t *testing.T, ctx context.Context, eng *client.Client, sw *state.Swarm) (tokens []string, gateways map[string]string) {
	t.Helper()
	gateways = map[string]string{}
	for _, c := range sw.Containers {
		info, err := eng.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			t.Fatalf("inspect %s: %v", c.ContainerName, err)
		}
		var tok, cainfo, sslCertFile string
		for _, kv := range info.Config.Env {
			if v, ok := strings.CutPrefix(kv, contract.EnvGitToken+"="); ok {
				tok = v
			}
			if v, ok := strings.CutPrefix(kv, "GIT_SSL_CAINFO="); ok {
				cainfo = v
			}
			if v, ok := strings.CutPrefix(kv, "SSL_CERT_FILE="); ok {
				sslCertFile = v // the image's own trust store, if anything
			}
		}
		if sslCertFile != "" && sslCertFile == cainfo {
			t.Errorf("%s: SSL_CERT_FILE points at the git service's CA: it replaces the image's trust store", c.ContainerName)
		}
		if len(tok) < 16 {
			t.Fatalf("%s: no git token in the container env (%q)", c.ContainerName, tok)
		}
		if cainfo == "" {
			t.Errorf("%s: GIT_SSL_CAINFO not set", c.ContainerName)
		}
		if slices.Contains(tokens, tok) {
			t.Errorf("%s: token shared with another container", c.ContainerName)
		}
		tokens = append(tokens, tok)
		// No network: the git service is on the host's loopback, reached
		// through the container's own socket, forwarded by the runner to
		// the same loopback address inside.
		if info.HostConfig.NetworkMode != "none" {
			t.Errorf("%s: network mode %q, want none", c.ContainerName, info.HostConfig.NetworkMode)
		}
		gateways[c.ContainerName] = "127.0.0.1"
		if info.State.Running || info.State.ExitCode != 0 {
			t.Errorf("%s: running=%v exit=%d", c.ContainerName, info.State.Running, info.State.ExitCode)
		}
	}
	return tokens, gateways
}

// checkLocalState checks the state file: both completed, counters exact,
// acpPid cleared.
func checkLocalState(t *testing.T, sw *state.Swarm, wantStories map[string]int, branches map[string]string) {
	t.Helper()
	for _, c := range sw.Containers {
		n, ok := wantStories[c.ContainerName]
		if !ok {
			t.Fatalf("unexpected container %s", c.ContainerName)
		}
		want := state.Progress{Total: n, Completed: n}
		if c.Status != state.StatusCompleted || c.StoryProgress != want || c.ACPPID != nil || c.BranchName != branches[c.ContainerName] {
			t.Errorf("%s: status %s progress %+v (want %+v) acpPid %v branch %s", c.ContainerName, c.Status, c.StoryProgress, want, c.ACPPID, c.BranchName)
		}
	}
}

// localJournalTally is what checkLocalJournal counts in a journal: the
// record index each story started and completed at, and the lines.
type localJournalTally struct {
	started, done                                   map[string]int
	completions, stdoutLines, stderrLines, requests int
}

// checkLocalJournal checks a container's journal: every line the container
// wrote to stdout is a valid acpmsg message; each of its n stories
// in_progress then completed, in dependency order (the diamond's or the
// linear chain's), then exactly one completion.
func checkLocalJournal(t *testing.T, repo string, sw *state.Swarm, c *state.Container, n int, gateway string, isDiamond bool) {
	t.Helper()
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tl := localJournalTally{started: map[string]int{}, done: map[string]int{}}
	for i, r := range recs {
		switch r.Stream {
		case state.StreamDaemon:
			tallyLocalTaskRequest(t, c.ContainerName, r, gateway, &tl)
			continue
		case state.StreamStderr:
			tl.stderrLines++ // the runner's log lines (checked for leaks elsewhere)
			continue
		}
		tallyLocalContainerLine(t, sw, c, recs, i, &tl)
	}
	started, done := tl.started, tl.done
	if tl.requests != 1 {
		t.Errorf("%s: %d task-requests journaled, want 1", c.ContainerName, tl.requests)
	}
	if len(started) != n || len(done) != n || tl.completions != 1 {
		t.Errorf("%s: %d started, %d completed, %d completions; want %d, %d, 1", c.ContainerName, len(started), len(done), tl.completions, n, n)
		for _, r := range recs {
			t.Logf("  seq=%d cursor=%s stream=%s type=%s %s", r.Seq, r.Cursor, r.Stream, r.Type, bytes.TrimSpace(append(r.Message, r.RawLine()...)))
		}
	}
	// Dependency order: a story starts after its dependencies completed.
	deps := map[string][]string{"US-002": {"US-001"}, "US-003": {"US-002"}}
	if isDiamond {
		deps = map[string][]string{"US-002": {"US-001"}, "US-003": {"US-001"}, "US-004": {"US-002", "US-003"}}
	}
	for s, ds := range deps {
		for _, d := range ds {
			if started[s] < done[d] {
				t.Errorf("%s: %s started before its dependency %s completed", c.ContainerName, s, d)
			}
		}
	}
	t.Logf("%s: %d stdout lines (all valid), %d stderr log lines journaled", c.ContainerName, tl.stdoutLines, tl.stderrLines)
}

// tallyLocalTaskRequest counts the task-request the daemon sent, checking
// the repository is the git service, over https on the swarm network's
// gateway.
func tallyLocalTaskRequest(t *testing.T, name string, r state.Record, gateway string, tl *localJournalTally) {
	t.Helper()
	if r.Type != string(acpmsg.TypeTaskRequest) {
		return
	}
	_, req, err := acpmsg.ParseTaskRequest(r.Message)
	if err != nil {
		t.Errorf("%s: journaled task-request: %v", name, err)
	} else if u, err := url.Parse(req.RepoURL); err != nil || u.Scheme != "https" || u.Hostname() != gateway || u.Port() == "" || u.User != nil {
		t.Errorf("%s: repoUrl %q is not the git service on the gateway %s", name, req.RepoURL, gateway)
	} else {
		tl.requests++
	}
}

// tallyLocalContainerLine checks the container's stdout record recs[i] is
// a valid message of this swarm and container and counts it.
func tallyLocalContainerLine(t *testing.T, sw *state.Swarm, c *state.Container, recs []state.Record, i int, tl *localJournalTally) {
	t.Helper()
	r := recs[i]
	tl.stdoutLines++
	if !r.Valid || r.Reason != "" || r.Rejected != "" {
		t.Errorf("%s: stdout record %d invalid: %s %s %s", c.ContainerName, r.Seq, r.Reason, r.Rejected, r.RawLine())
		return
	}
	m, err := acpmsg.ParseFromContainer(r.Message)
	if err != nil {
		t.Errorf("%s: record %d does not re-validate: %v\n%s", c.ContainerName, r.Seq, err, r.Message)
		return
	}
	if m.SwarmID != sw.SwarmID || m.ContainerID == "" || !(strings.HasPrefix(c.ContainerID, m.ContainerID) || strings.HasPrefix(m.ContainerID, c.ContainerID)) {
		t.Errorf("%s: record %d ids swarm=%s container=%s", c.ContainerName, r.Seq, m.SwarmID, m.ContainerID)
	}
	switch pl := m.Payload.(type) {
	case *acpmsg.ProgressUpdate:
		switch pl.Status {
		case acpmsg.StoryInProgress:
			tl.started[pl.StoryID] = i
		case acpmsg.StoryCompleted:
			tl.done[pl.StoryID] = i
		default:
			t.Errorf("%s: %s %s: %s", c.ContainerName, pl.StoryID, pl.Status, pl.Output)
		}
	case *acpmsg.Completion:
		tl.completions++
		if pl.Status != acpmsg.CompletionCompleted || len(pl.Errors) != 0 {
			t.Errorf("%s: completion %+v", c.ContainerName, pl)
		}
		if i != len(recs)-1 && !onlyDaemonAfter(recs[i+1:]) {
			t.Errorf("%s: container lines after the completion", c.ContainerName)
		}
	default:
		t.Errorf("%s: unexpected %s message", c.ContainerName, m.Type)
	}
}

// checkLocalBranches checks the branches in the checkout: exactly one
// commit per completed story on top of the base (the runner commits once
// per story: the story's work and its task-file status together; its final
// push adds no commit), the last one holding every status completed. The
// checkout's own branch did not move.
func checkLocalBranches(t *testing.T, repo, base string, branches map[string]string, wantStories map[string]int) {
	t.Helper()
	for name, b := range branches {
		n := wantStories[name]
		if got := gitOut(t, repo, "rev-list", "--count", base+".."+b); got != strconv.Itoa(n) {
			t.Errorf("%s: %s commits on top of the base, want %d:\n%s", b, got, n, gitOut(t, repo, "log", "--oneline", base+".."+b))
		}
		if err := exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", base, b).Run(); err != nil {
			t.Errorf("%s does not build on the base: %v", b, err)
		}
		subjects := strings.Split(gitOut(t, repo, "log", "--reverse", "--format=%s", base+".."+b), "\n")
		for _, s := range subjects {
			if !strings.HasPrefix(s, "US-") || !strings.HasSuffix(s, "(completed)") {
				t.Errorf("%s: commit %q is not a completed story's", b, s)
			}
		}
		taskPath := ".aimi/tasks/" + strings.TrimPrefix(name, "aimi-") + "-tasks.json"
		var tf struct {
			UserStories []struct{ ID, Status string } `json:"userStories"`
		}
		if err := json.Unmarshal([]byte(gitOut(t, repo, "show", b+":"+taskPath)), &tf); err != nil {
			t.Fatal(err)
		}
		for _, s := range tf.UserStories {
			if s.Status != "completed" {
				t.Errorf("%s: %s is %s in the published task file", b, s.ID, s.Status)
			}
		}
	}
	if head := gitOut(t, repo, "rev-parse", "HEAD"); head != base || gitOut(t, repo, "symbolic-ref", "--short", "HEAD") != "main" {
		t.Errorf("the checkout's HEAD moved: %s", head)
	}
}

// leakScan looks for the git tokens and the CA key's lines in texts and in
// the files under the checkout and the daemon's data dir.
type leakScan struct {
	t       *testing.T
	secrets map[string]string
	keyFile string
	roots   []string
}

// newLeakScan reads the CA key where the git service keeps it in dataDir,
// checking its mode, and takes the tokens and the key's body as secrets.
func newLeakScan(t *testing.T, dataDir string, tokens []string, repo string) *leakScan {
	t.Helper()
	keyFile := filepath.Join(dataDir, "git", "ca-key.pem")
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("the CA key is not where the git service keeps it: %v", err)
	}
	if st, _ := os.Stat(keyFile); st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v, want 0600", st.Mode().Perm())
	}
	secrets := map[string]string{}
	for i, tok := range tokens {
		secrets[fmt.Sprintf("token %d", i)] = tok
	}
	var body []string
	for _, l := range strings.Split(string(key), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "-----") {
			body = append(body, l)
			if len(l) >= 32 {
				secrets[fmt.Sprintf("CA key line %d", len(secrets))] = l
			}
		}
	}
	secrets["CA key body"] = strings.Join(body, "")
	if len(body) == 0 {
		t.Fatal("CA key file holds no PEM body")
	}
	return &leakScan{t: t, secrets: secrets, keyFile: keyFile, roots: []string{repo, dataDir}}
}

func (l *leakScan) check(where, text string) {
	for what, s := range l.secrets {
		if strings.Contains(text, s) {
			l.t.Errorf("%s holds the %s", where, what)
		}
	}
}

// scanFiles checks every file under the roots but the CA key file; it
// returns how many it read.
func (l *leakScan) scanFiles() int {
	scanned := 0
	for _, root := range l.roots {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path == l.keyFile {
				return nil
			}
			b, err := os.ReadFile(path)
			if err == nil {
				scanned++
				l.check(path, string(b))
			}
			return nil
		})
	}
	return scanned
}

// checkLocalCleanup runs `aimi swarm cleanup`: the branches were received,
// so nothing is kept, and no container, network or git service data of the
// swarm is left.
func checkLocalCleanup(t *testing.T, ctx context.Context, eng *client.Client, run func(args ...string) (int, string, string), repo, dataDir string, sw *state.Swarm, linear, diamond string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dataDir, "git", "repos", sw.SwarmID+".git", "HEAD")); err != nil {
		t.Errorf("the git service's mirror of the swarm before cleanup: %v", err)
	}
	code, out, errOut := run("swarm", "cleanup")
	if code != 0 || !strings.Contains(out, "aimi-"+linear) || !strings.Contains(out, "aimi-"+diamond) || strings.Contains(out, "kept") {
		t.Errorf("cleanup: exit %d\n%s\n%s", code, out, errOut)
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelProject+"="+repo))
	if cs, err := eng.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) != 0 {
		t.Errorf("containers left after cleanup: %d %v", len(cs), err)
	}
	ns, err := eng.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Errorf("list networks: %v", err)
	}
	for _, n := range ns {
		if !dockertest.Leaked(ctx, eng, n.ID) {
			t.Errorf("network %s left after cleanup", n.Name)
		}
	}
	for _, c := range sw.Containers {
		if _, err := eng.ContainerInspect(ctx, c.ContainerID); err == nil {
			t.Errorf("%s still exists after cleanup", c.ContainerName)
		}
	}
	// The git service's mirror of the swarm goes with its last container.
	mirrors, _ := filepath.Glob(filepath.Join(dataDir, "git", "repos", "*"))
	if len(mirrors) != 0 {
		t.Errorf("git service data left after cleanup: %v", mirrors)
	}
}

// onlyDaemonAfter reports whether the records after a completion are the
// daemon's own or the runner's stderr logs (its last log lines may follow).
func onlyDaemonAfter(recs []state.Record) bool {
	for _, r := range recs {
		if r.Stream == state.StreamStdout {
			return false
		}
	}
	return true
}
