package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
)

// landVerify fails only on a tree holding both a.txt and b.txt: each
// branch passes it alone (so both containers complete), their merge does
// not.
const landVerify = `sh -c '! { test -e a.txt && test -e b.txt; }'`

// TestLandChecksEachMergeWithTheVerifyCommand: with land.verify_command
// set, each clean merge is checked in a sandbox of the swarm whose runner
// runs the command on the merged tree without an agent turn. The first
// branch lands verified; the second merges cleanly but fails the check on
// the merge, its fix-up (the demo agent cannot mend it) fails too, and it
// is held saying the verify command failed, its merge not on the
// integration branch.
func TestLandChecksEachMergeWithTheVerifyCommand(t *testing.T) {
	parallel(t)
	ls := startLandSwarm(t, map[string][]byte{"a": landTaskFile("a", "a.txt", "US-101"), "b": landTaskFile("b", "b.txt", "US-201")},
		true, "AIMI_LAND_VERIFY_COMMAND="+landVerify)
	sw := validState(t, ls.repo)
	a, b := containerOf(t, sw, "a").ContainerName, containerOf(t, sw, "b").ContainerName
	code, out, errOut := ls.aimi("swarm", "land", "--order", a+","+b, "--json")
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || len(rep.Results) != 2 {
		t.Fatalf("land: %d %v, want exit 1 (b held)\n%s\n%s", code, err, out, errOut)
	}
	if r := rep.Results[0]; r.Container != a || r.Outcome != "landed" || r.Verify != "passed" {
		t.Errorf("%s: %+v, want landed and verified", a, r)
	}
	if r := rep.Results[1]; r.Container != b || r.Outcome != "held" || r.Verify != "failed" || !strings.Contains(r.Reason, "verify command failed") {
		t.Errorf("%s: %+v, want held for the failed check", b, r)
	}
	if n := gitOut(t, ls.repo, "rev-list", "--count", "--first-parent", ls.base+".."+rep.Branch); n != "1" {
		t.Errorf("%s holds %s merges, want 1 (the checked one only)", rep.Branch, n)
	}
	// The record is the state file's land section, valid against the
	// schema: the target, each branch's outcome in order, the merge commit
	// and the check's result.
	l := validState(t, ls.repo).Land
	if l == nil || l.Running || l.Branch != rep.Branch || l.Onto != rep.Onto || l.OntoCommit != rep.OntoCommit || len(l.Results) != 2 {
		t.Fatalf("the state file's land section: %+v, want the land's record", l)
	}
	if r := l.Results[0]; r.Container != a || r.Outcome != "landed" || r.Merge == "" || r.Merge != rep.Results[0].Merge || r.Verify != "passed" {
		t.Errorf("state file, %s: %+v, want landed with its merge, verified", a, r)
	}
	if r := l.Results[1]; r.Container != b || r.Outcome != "held" || r.Verify != "failed" || r.Reason != rep.Results[1].Reason {
		t.Errorf("state file, %s: %+v, want held with the reason", b, r)
	}
}
