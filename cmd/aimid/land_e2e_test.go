package main

import (
	"cmp"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/demoagent"
)

// landTaskFile is a one-story task file whose story writes file (and
// has the extra criteria).
func landTaskFile(name, file, id string, extra ...string) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"schemaVersion": "3.0",
		"metadata":      map[string]any{"title": "feat: " + name, "type": "feat", "branchName": "feat/" + name, "createdAt": "2026-12-07", "planPath": nil},
		"userStories": []map[string]any{{"id": id, "title": "write " + file, "description": "As a developer, I want " + file + " so that the feature grows.",
			"acceptanceCriteria": append([]string{"File " + file + " exists"}, extra...), "priority": 1, "status": "pending", "dependsOn": []string{}, "notes": ""}},
	}, "", "  ")
	return b
}

// TestLandMergesFixesAndHolds: six task files on the real daemon, engine
// and runner: two pairs write one file each differently, two are
// independent. `aimi swarm land --order` lands the four that merge, one
// merge commit each onto aimi/land/<swarm> started at the checked-out
// branch; the second of the first pair conflicts and its fix-up agent
// (the demo agent, in a sandbox of the swarm) keeps both sides: fixed;
// the second pair's fix-up agents refuse, both of the two land.fix_attempts
// gives it: held naming the file (exit 1).
// The integration branch in the checkout holds every landed story's
// commit and no marker, and no branch of the user's moved.
func TestLandMergesFixesAndHolds(t *testing.T) {
	parallel(t)
	files := map[string]string{"left": "shared.txt", "right": "shared.txt", "red": "colour.txt", "blue": "colour.txt", "one": "one.txt", "two": "two.txt"}
	ids := map[string]string{"left": "US-101", "right": "US-201", "red": "US-301", "blue": "US-401", "one": "US-501", "two": "US-601"}
	tasks := map[string][]byte{}
	for name, file := range files {
		var extra []string
		if name == "blue" {
			extra = append(extra, "The colour stays blue "+demoagent.MarkerRefuseFix)
		}
		tasks[name] = landTaskFile(name, file, ids[name], extra...)
	}
	ls := startLandSwarm(t, tasks, true, "AIMI_LAND_FIX_ATTEMPTS=2")
	sw := validState(t, ls.repo)
	var order []string
	for _, tf := range []string{"right", "red", "one", "left", "blue", "two"} {
		order = append(order, containerOf(t, sw, tf).ContainerName)
	}
	code, out, errOut := ls.aimi("swarm", "land", "--order", strings.Join(order, ","), "--json")
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("land: %d %v, want exit 1 (one held)\n%s\n%s", code, err, out, errOut)
	}
	checkLandReport(t, rep, order, map[string]string{order[3]: "fixed", order[4]: "held"})
	if r := rep.Results[4]; !strings.Contains(r.Reason, "2 fix-up(s) tried") {
		t.Errorf("%s: %q, want the two fix-ups land.fix_attempts gives it", r.Container, r.Reason)
	}
	checkLandedCheckout(t, ls.repo, ls.base, rep, ids)
	code, out, errOut = ls.aimi("swarm", "logs", "land")
	for _, want := range []string{"daemon:land", "land of 6 branch(es) onto", order[3] + ": fixing in ", order[3] + ": fixed as merge", order[4] + ": held: ", "land done: " + rep.Branch} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("aimi swarm logs land: %d, want a line with %q:\n%s\n%s", code, want, out, errOut)
		}
	}
}

// checkLandReport: the containers landed in order, each with the
// outcome want gives it ("landed" when it gives none).
func checkLandReport(t *testing.T, rep api.LandReport, order []string, want map[string]string) {
	t.Helper()
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Container)
		w := cmp.Or(want[r.Container], "landed")
		switch {
		case r.Outcome != w:
			t.Errorf("%s: %+v, want %s", r.Container, r, w)
		case w == "held" && (!slices.Equal(r.Files, []string{"colour.txt"}) || r.Merge != "" || !strings.Contains(r.Reason, "fix-up")):
			t.Errorf("%s: %+v, want held for a conflict on colour.txt its fix-up did not resolve", r.Container, r)
		case w != "held" && r.Merge == "":
			t.Errorf("%s: %+v, want a merge", r.Container, r)
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
	if n := gitOut(t, repo, "rev-list", "--count", "--first-parent", base+".."+rep.Branch); n != "5" {
		t.Errorf("%s holds %s merges, want 5", rep.Branch, n)
	}
	log := gitOut(t, repo, "log", "--format=%B", base+".."+rep.Branch)
	for _, id := range []string{ids["right"], ids["red"], ids["one"], ids["left"], ids["two"]} {
		if !strings.Contains(log, id) {
			t.Errorf("no commit of %s on %s:\n%s", id, rep.Branch, log)
		}
	}
	if strings.Contains(log, ids["blue"]) {
		t.Errorf("the held branch's story %s is on %s", ids["blue"], rep.Branch)
	}
	shared := gitOut(t, repo, "show", rep.Branch+":shared.txt")
	if !strings.Contains(shared, ids["left"]) || !strings.Contains(shared, ids["right"]) {
		t.Errorf("shared.txt after the fix-up keeps one side only:\n%s", shared)
	}
	// git grep exits 1 when nothing matches.
	if out, err := exec.Command("git", "-C", repo, "grep", "-n", "-e", "<<<<<<<", rep.Branch, "--", ".", ":!.aimi").CombinedOutput(); err == nil {
		t.Errorf("conflict markers on %s:\n%s", rep.Branch, out)
	}
}
