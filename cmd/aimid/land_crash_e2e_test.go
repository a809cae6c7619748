package main

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/land"
)

// TestLandGoesOnAfterAKill9MidFixUp: a land's fix-up runs (its demo agent
// takes its time) when aimid is killed with SIGKILL. The next daemon
// adopts the fix-up container; the status shows the cut-short land from
// its record; `aimi swarm land` again waits for that same fix-up instead
// of starting another, and ends with the conflict fixed: no merge done
// twice, no second fix-up, both sides kept.
func TestLandGoesOnAfterAKill9MidFixUp(t *testing.T) {
	parallel(t)
	ls := startLandSwarm(t, map[string][]byte{"right": landTaskFile("right", "shared.txt", "US-201"),
		"left": landTaskFile("left", "shared.txt", "US-101", "Kept as written "+demoagent.MarkerSlowFix)}, true)
	repo, sock, ctx := ls.repo, ls.sock, ls.ctx
	sw := validState(t, repo)
	order := containerOf(t, sw, "right").ContainerName + "," + containerOf(t, sw, "left").ContainerName
	landDone := make(chan int, 1)
	go func() {
		code, _, _ := aimi(ctx, "swarm", "land", "--order", order, "--repo", repo, "--socket", sock)
		landDone <- code
	}()
	waitFor(t, sock, repo, 4*time.Minute, "the land's fix-up running", func(v api.SwarmView) bool {
		return v.Land != nil && slices.ContainsFunc(v.Land.Results, func(r api.LandResult) bool { return r.Outcome == api.LandFixing })
	})
	ls.p.cmd.Process.Signal(syscall.SIGKILL)
	ls.p.wait(t)
	<-landDone
	ls.launch(t)
	v := waitFor(t, sock, repo, time.Minute, "the record of the cut-short land", func(v api.SwarmView) bool { return v.Land != nil })
	if v.Land.Running {
		t.Errorf("a land cut short by the crash shows as running: %+v", v.Land)
	}
	code, out, errOut := aimi(ctx, "swarm", "land", "--order", order, "--json", "--repo", repo, "--socket", sock)
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("land after the restart: %d %v\n%s\n%s", code, err, out, errOut)
	}
	checkLandReport(t, rep, strings.Split(order, ","), map[string]string{strings.Split(order, ",")[1]: "fixed"})
	if n := gitOut(t, repo, "rev-list", "--count", "--first-parent", ls.base+".."+rep.Branch); n != "2" {
		t.Errorf("%s holds %s merges, want 2 (none twice)", rep.Branch, n)
	}
	fixups := 0
	for _, c := range validState(t, repo).Containers {
		if land.IsLandRun(c.TaskFilePath) {
			fixups++
		}
	}
	if fixups != 1 {
		t.Errorf("%d fix-up containers, want the one the first land started", fixups)
	}
	if shared := gitOut(t, repo, "show", rep.Branch+":shared.txt"); !strings.Contains(shared, "US-101") || !strings.Contains(shared, "US-201") {
		t.Errorf("shared.txt keeps one side only:\n%s", shared)
	}
}
