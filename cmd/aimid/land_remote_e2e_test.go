package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/gittest"
)

// TestRemoteModeRadarAndLandPushToOriginWithOnePullRequest: the real
// daemon, engine, runner and demo agent in remote git mode, origin an
// HTTPS server of the test's (its own CA) that also plays the GitHub API
// on its host. Three task files: left and right write shared.txt
// differently, apart writes a file of its own; each has a slow second
// story. While they run, the radar (reading origin) reports left and
// right, and only them, as a conflict on shared.txt, in status, status
// --json and as a conflict-detected event. Once all completed,
// `aimi swarm land` merges them in the daemon's copy of origin, each
// clean merge checked by land.verify_command in a sandbox that cloned it
// from origin, the second of the pair through a fix-up sandbox that
// cloned its branch from origin (the demo agent keeps both sides), pushes aimi/land/<swarm> to
// origin holding every story with no marker left, and opens one pull
// request onto main listing the three branches.
func TestRemoteModeRadarAndLandPushToOriginWithOnePullRequest(t *testing.T) {
	parallelLong(t)
	img := sandboxImage(t)
	github := gittest.NewGitHubPulls(t, hostedToken, "acme/widgets", "")
	origin := startHTTPSOriginWith(t, "acme/widgets", github.Config.Handler)
	repo, caEnv := remoteLandCheckout(t, origin)
	tmp := shortDir(t)
	sock := filepath.Join(tmp, "aimid.sock")
	apiURL := strings.TrimSuffix(origin.url, "/acme/widgets.git") + "/api/v3"
	launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(tmp, "data"), Image: img, Local: true, Env: []string{
		"AIMI_GIT_MODE=remote", "AIMI_GIT_ORIGIN_CA=" + origin.caFile, caEnv,
		// The daemon's own HTTPS client (the pull request) trusts origin's CA.
		"SSL_CERT_FILE=" + origin.caFile,
		"AIMI_PUBLISH_GITHUB_API=" + apiURL, "GITHUB_TOKEN=" + hostedToken,
		// Each clean merge is checked in a sandbox cloned from origin.
		"AIMI_LAND_VERIFY_COMMAND=test -d .aimi",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	events := collectEvents(ctx, t, sock, repo)
	run := func(args ...string) (int, string, string) {
		return aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
	}
	if code, out, errOut := run("swarm", "start", "--all", "--max", "6"); code != 0 {
		t.Fatalf("start: %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { aimi(context.Background(), "swarm", "cleanup", "--repo", repo, "--socket", sock, "--force") })

	v := waitFor(t, sock, repo, 6*time.Minute, "the radar's conflict of left and right, read from origin", func(v api.SwarmView) bool {
		return len(radarConflicts(v)) >= 1
	})
	checkRemoteRadar(t, v)
	if code, out, _ := run("swarm", "status", "--json"); code != 0 || !strings.Contains(out, `"kind": "conflict"`) || !strings.Contains(out, "shared.txt") {
		t.Errorf("status --json: %d, want the conflict on shared.txt:\n%s", code, out)
	}
	events.wait(t, func(es []api.Event) bool {
		return slices.ContainsFunc(es, func(e api.Event) bool {
			return e.Kind == api.EventConflictDetected && e.Conflict != nil && slices.Equal(e.Conflict.Files, []string{"shared.txt"})
		})
	})
	waitFor(t, sock, repo, 6*time.Minute, "every container completed", func(v api.SwarmView) bool {
		return len(v.Containers) == 3 && allExited(v)
	})

	code, out, errOut := run("swarm", "land", "--json")
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("land: exit %d %v, want 0 (every branch landed or fixed)\n%s\n%s", code, err, out, errOut)
	}
	checkRemoteLandReport(t, rep, origin)
	checkRemoteLandOnOrigin(t, origin.bare, rep)
	checkLandPullRequest(t, github, rep)
	checkNoTokenInSandboxes(ctx, t, repo)
	if strings.Contains(out+errOut, hostedToken) {
		t.Error("the GitHub token is in the land's answer")
	}
	code, out, _ = run("swarm", "land")
	if code != 0 || !strings.Contains(out, "pull request") {
		t.Errorf("land again: exit %d, want 0 and the pull request (nothing new to land):\n%s", code, out)
	}
	if code, out, _ := run("swarm", "status"); code != 0 || !strings.Contains(out, "; pull request https://") {
		t.Errorf("status: exit %d, want the land's line with its pull request:\n%s", code, out)
	}
	if code, out, _ := run("swarm", "logs", "land"); code != 0 || !strings.Contains(out, "pull request of "+rep.Branch+" onto main: "+rep.PRURL) {
		t.Errorf("logs land: exit %d, want the pull request journaled:\n%s", code, out)
	}
	// The daemon's copy of origin goes with the swarm.
	copies := filepath.Join(tmp, "data", "origin")
	if left, err := os.ReadDir(copies); err != nil || len(left) != 1 {
		t.Fatalf("%s: %v %v, want the swarm's copy of origin while it runs", copies, left, err)
	}
	if code, _, errOut := run("swarm", "cleanup", "--force"); code != 0 {
		t.Fatalf("cleanup: exit %d %s", code, errOut)
	}
	if left, _ := os.ReadDir(copies); len(left) != 0 {
		t.Errorf("the copy of origin is left after cleanup: %v", left)
	}
}

// remoteLandCheckout is a checkout of origin with the three task files
// pushed on main, and the environment its git needs for origin's CA.
func remoteLandCheckout(t *testing.T, origin httpsOrigin) (string, string) {
	t.Helper()
	repo := shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	dir := filepath.Join(repo, ".aimi", "tasks")
	os.MkdirAll(dir, 0o755)
	for i, tf := range []struct{ name, file string }{{"left", "shared.txt"}, {"right", "shared.txt"}, {"apart", "apart.txt"}} {
		if err := os.WriteFile(filepath.Join(dir, tf.name+"-tasks.json"), radarTaskFile(tf.name, tf.file, 100*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, repo)
	removeProjectContainersAtEnd(t, repo)
	gitOut(t, repo, "remote", "add", "origin", origin.url)
	gitOut(t, repo, "config", "http.sslCAInfo", origin.caFile)
	caEnv := "GIT_SSL_CAINFO=" + origin.caFile
	for _, args := range [][]string{{"push", "-q", "origin", "main"}, {"fetch", "-q", "origin"}, {"remote", "set-head", "origin", "main"}} {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), caEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo, caEnv
}

// checkRemoteRadar: the one conflict is left and right's on shared.txt,
// seen while both still run.
func checkRemoteRadar(t *testing.T, v api.SwarmView) {
	t.Helper()
	names, running := map[string]string{}, map[string]bool{}
	for _, c := range v.Containers {
		names[strings.TrimSuffix(filepath.Base(c.TaskFile), "-tasks.json")] = c.Name
		running[c.Name] = c.Status == "running"
	}
	want := []string{names["left"], names["right"]}
	slices.Sort(want)
	cs := radarConflicts(v)
	if len(cs) != 1 || !slices.Equal(cs[0].Files, []string{"shared.txt"}) || !slices.Equal(cs[0].Containers, want) {
		t.Fatalf("conflicts %+v, want %v's on shared.txt only", v.Conflicts, want)
	}
	for _, n := range want {
		if !running[n] {
			t.Errorf("the conflict came after %s ended", n)
		}
	}
}

// checkRemoteLandReport: three branches onto origin's main, the second of
// left and right fixed, the rest landed; pushed to origin with its pull
// request.
func checkRemoteLandReport(t *testing.T, rep api.LandReport, origin httpsOrigin) {
	t.Helper()
	outcomes := map[string]int{}
	for _, r := range rep.Results {
		outcomes[r.Outcome]++
		if r.Merge == "" {
			t.Errorf("%s: %+v, want a merge", r.Container, r)
		}
		if r.Outcome == "fixed" && !slices.Equal(r.Files, []string{"shared.txt"}) {
			t.Errorf("%s: %+v, want fixed on shared.txt", r.Container, r)
		}
		if r.Outcome == "landed" && r.Verify != "passed" {
			t.Errorf("%s: %+v, want its merge checked", r.Container, r)
		}
	}
	if len(rep.Results) != 3 || outcomes["landed"] != 2 || outcomes["fixed"] != 1 {
		t.Errorf("outcomes %v of %+v, want 2 landed and 1 fixed", outcomes, rep.Results)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(origin.url, "/acme/widgets.git"), "https://")
	if !strings.HasPrefix(rep.Branch, "aimi/land/") || rep.Onto != "main" || rep.Origin != origin.url || rep.PRURL != "https://"+host+"/acme/widgets/pull/1" {
		t.Errorf("report: branch %q onto %q origin %q pr %q, want aimi/land/... onto main pushed to %s with pull request 1", rep.Branch, rep.Onto, rep.Origin, rep.PRURL, origin.url)
	}
}

// checkRemoteLandOnOrigin: origin's integration branch is the land's tip
// and holds every story of the three, shared.txt with both sides and no
// marker; origin's main did not move.
func checkRemoteLandOnOrigin(t *testing.T, bare string, rep api.LandReport) {
	t.Helper()
	if got := gitOut(t, bare, "rev-parse", "refs/heads/"+rep.Branch); got != rep.Tip {
		t.Fatalf("origin's %s is %s, want the land's tip %s", rep.Branch, got, rep.Tip)
	}
	if got := gitOut(t, bare, "rev-parse", "refs/heads/main"); got != rep.OntoCommit {
		t.Errorf("origin's main moved to %s", got)
	}
	log := gitOut(t, bare, "log", "--format=%B", "main.."+rep.Branch)
	for _, id := range []string{"US-101", "US-102", "US-201", "US-202", "US-301", "US-302"} {
		if !strings.Contains(log, id) {
			t.Errorf("no commit of %s on origin's %s", id, rep.Branch)
		}
	}
	if n := gitOut(t, bare, "rev-list", "--count", "--first-parent", "main.."+rep.Branch); n != "3" {
		t.Errorf("origin's %s holds %s merges, want 3", rep.Branch, n)
	}
	shared := gitOut(t, bare, "show", rep.Branch+":shared.txt")
	if !strings.Contains(shared, "US-101") || !strings.Contains(shared, "US-201") {
		t.Errorf("shared.txt after the fix-up keeps one side only:\n%s", shared)
	}
	if out, err := exec.Command("git", "-C", bare, "grep", "-n", "-e", "<<<<<<<", rep.Branch, "--", ".", ":!.aimi").CombinedOutput(); err == nil {
		t.Errorf("conflict markers on origin's %s:\n%s", rep.Branch, out)
	}
	// The fix-up's sandbox cloned its branch from origin and pushed its
	// resolution there: the fix-up commit (markers) and the agent's on top.
	for _, r := range rep.Results {
		if r.Outcome == "landed" {
			// The check's sandbox cloned the merge from origin.
			check := rep.Branch + "--verify-" + r.Container
			if got := gitOut(t, bare, "merge-base", r.Merge, check); got != r.Merge {
				t.Errorf("origin's %s does not start at the merge %s it checked (merge base %s)", check, r.Merge, got)
			}
			continue
		}
		fix := rep.Branch + "--fix-" + r.Container
		if n := gitOut(t, bare, "rev-list", "--count", rep.Branch+".."+fix); n != "2" {
			t.Errorf("origin's %s has %s commits off the integration branch, want the fix-up's and its agent's", fix, n)
		}
		if got := gitOut(t, bare, "show", fix+":shared.txt"); got != gitOut(t, bare, "show", rep.Branch+":shared.txt") {
			t.Errorf("origin's %s resolved shared.txt as\n%s\nnot as the merge on %s", fix, got, rep.Branch)
		}
	}
}

// checkLandPullRequest: one pull request, the integration branch onto
// main, its body naming every container and its outcome.
func checkLandPullRequest(t *testing.T, github *gittest.GitHubPulls, rep api.LandReport) {
	t.Helper()
	asked := github.Requests()
	if len(asked) != 1 || asked[0]["head"] != rep.Branch || asked[0]["base"] != "main" {
		t.Fatalf("pull requests asked for: %v, want one of %s onto main", asked, rep.Branch)
	}
	body, _ := asked[0]["body"].(string)
	t.Logf("the pull request's body:\n%s", body)
	for _, r := range rep.Results {
		if !strings.Contains(body, r.Container) || !strings.Contains(body, r.Branch) {
			t.Errorf("the pull request's body does not name %s (%s):\n%s", r.Container, r.Branch, body)
		}
	}
	for _, w := range []string{"**landed** (2)", "**fixed** (1)"} {
		if !strings.Contains(body, w) {
			t.Errorf("the pull request's body lacks %q:\n%s", w, body)
		}
	}
}

// checkNoTokenInSandboxes: no container of the swarm (the fix-up's and
// checks' among them) has the publish token in its environment.
func checkNoTokenInSandboxes(ctx context.Context, t *testing.T, repo string) {
	t.Helper()
	cli := dockertest.Client(t)
	sw := validState(t, repo)
	if len(sw.Containers) < 5 {
		t.Errorf("%d containers in the state, want the three, the fix-up and the checks", len(sw.Containers))
	}
	for _, c := range sw.Containers {
		info, err := cli.ContainerInspect(ctx, c.ContainerID)
		if err != nil {
			t.Fatalf("inspect %s: %v", c.ContainerName, err)
		}
		if env := strings.Join(info.Config.Env, "\n"); strings.Contains(env, hostedToken) {
			t.Errorf("the publish token is in the environment of %s", c.ContainerName)
		}
	}
}
