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
)

// landTaskFile is a one-story task file whose story writes file.
func landTaskFile(name, file, id string) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"schemaVersion": "3.0",
		"metadata":      map[string]any{"title": "feat: " + name, "type": "feat", "branchName": "feat/" + name, "createdAt": "2026-12-07", "planPath": nil},
		"userStories": []map[string]any{{"id": id, "title": "write " + file, "description": "As a developer, I want " + file + " so that the feature grows.",
			"acceptanceCriteria": []string{"File " + file + " exists"}, "priority": 1, "status": "pending", "dependsOn": []string{}, "notes": ""}},
	}, "", "  ")
	return b
}

// TestLandMergesTheSwarmAndHoldsTheConflict: four task files on the real
// daemon, engine and runner, two of which write one file differently.
// `aimi swarm land --order` lands the three that merge, one merge commit
// each onto aimi/land/<swarm> started at the checked-out branch, holds the
// second of the conflicting pair naming the file (exit 1), brings the
// integration branch into the checkout holding every landed story's
// commit, and moves no branch of the user's.
func TestLandMergesTheSwarmAndHoldsTheConflict(t *testing.T) {
	parallel(t)
	img := sandboxImage(t)
	repo := gitRepo(t, 1)
	dir := filepath.Join(repo, ".aimi", "tasks")
	files := map[string]string{"left": "shared.txt", "right": "shared.txt", "one": "one.txt", "two": "two.txt"}
	ids := map[string]string{"left": "US-101", "right": "US-201", "one": "US-301", "two": "US-401"}
	for name, file := range files {
		if err := os.WriteFile(filepath.Join(dir, name+"-tasks.json"), landTaskFile(name, file, ids[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, repo)
	base := gitOut(t, repo, "rev-parse", "HEAD")
	tmp := shortDir(t)
	sock := filepath.Join(tmp, "aimid.sock")
	startAimidLocal(t, sock, filepath.Join(tmp, "data"), img)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--follow", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start --follow: %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { aimi(context.Background(), "swarm", "cleanup", "--repo", repo, "--socket", sock, "--force") })
	sw := validState(t, repo)
	name := func(tf string) string { return containerOf(t, sw, tf).ContainerName }
	order := strings.Join([]string{name("right"), name("one"), name("left"), name("two")}, ",")
	code, out, errOut := aimi(ctx, "swarm", "land", "--order", order, "--json", "--repo", repo, "--socket", sock)
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("land: %d %v, want exit 1 (one held)\n%s\n%s", code, err, out, errOut)
	}
	checkLandReport(t, rep, []string{name("right"), name("one"), name("left"), name("two")}, name("left"))
	checkLandedCheckout(t, repo, base, rep, ids)
}

// checkLandReport: the containers landed in order, held the one.
func checkLandReport(t *testing.T, rep api.LandReport, order []string, held string) {
	t.Helper()
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Container)
		switch {
		case r.Container == held && (r.Outcome != "held" || !slices.Equal(r.Files, []string{"shared.txt"}) || r.Merge != ""):
			t.Errorf("%s: %+v, want held for a conflict on shared.txt", r.Container, r)
		case r.Container != held && (r.Outcome != "landed" || r.Merge == ""):
			t.Errorf("%s: %+v, want landed with a merge", r.Container, r)
		}
	}
	if !slices.Equal(got, order) {
		t.Errorf("landing order %v, want %v", got, order)
	}
	if !strings.HasPrefix(rep.Branch, "aimi/land/") || rep.Onto == "" || rep.Tip == "" || !strings.Contains(rep.Take, "merge --ff-only "+rep.Branch) {
		t.Errorf("report %+v", rep)
	}
}

// checkLandedCheckout: the integration branch in the checkout holds one
// merge per landed branch and every landed story's commit, no marker, and
// the user's branch did not move.
func checkLandedCheckout(t *testing.T, repo, base string, rep api.LandReport, ids map[string]string) {
	t.Helper()
	if got := gitOut(t, repo, "rev-parse", "refs/heads/"+rep.Branch); got != rep.Tip {
		t.Fatalf("%s in the checkout at %s, want %s", rep.Branch, got, rep.Tip)
	}
	if got := gitOut(t, repo, "rev-parse", "HEAD"); got != base {
		t.Errorf("the checked-out branch moved to %s", got)
	}
	if n := gitOut(t, repo, "rev-list", "--count", "--first-parent", base+".."+rep.Branch); n != "3" {
		t.Errorf("%s holds %s merges, want 3", rep.Branch, n)
	}
	log := gitOut(t, repo, "log", "--format=%B", base+".."+rep.Branch)
	for _, id := range []string{ids["right"], ids["one"], ids["two"]} {
		if !strings.Contains(log, id) {
			t.Errorf("no commit of %s on %s:\n%s", id, rep.Branch, log)
		}
	}
	if strings.Contains(log, ids["left"]) {
		t.Errorf("the held branch's story %s is on %s", ids["left"], rep.Branch)
	}
	// git grep exits 1 when nothing matches.
	if out, err := exec.Command("git", "-C", repo, "grep", "-n", "-e", "<<<<<<<", rep.Branch, "--", ".", ":!.aimi").CombinedOutput(); err == nil {
		t.Errorf("conflict markers on %s:\n%s", rep.Branch, out)
	}
}
