package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/land"
)

// killVerify is the land's verify command: it passes on every tree, and
// takes its time on the check of b's merge only (a.txt and b.txt landed,
// shared.txt not yet), so that a kill lands in the middle of that check.
const killVerify = `sh -c 'if test -e b.txt && ! test -e shared.txt; then sleep 25; fi'`

// killStop is one kill of the daemon in the middle of a land: at the
// point pause names (the daemon's land stops there, a test hook), or once
// the land's record shows seen.
type killStop struct {
	what  string
	pause land.Point
	of    string // ":<container>": at pause on that container's branch only
	seen  func(api.SwarmView) bool
	// run, when set, is a sandbox's command whose process must run when
	// aimid is killed and end before it starts again (the sandbox whose
	// task file it names).
	run struct{ taskFile, command string }
}

// TestLandKill9LoopsThroughALand: five task files on the real daemon,
// engine, runner and demo agent (a and b write files of their own, c, d
// and e the same one: d's fix-up agent takes its time, e's refuses), a
// land verify command. One land, in --order a..e, is cut by a SIGKILL of
// aimid at each point a crash may split: a's merge commit made but the
// integration branch not moved; the branch moved but not recorded; the
// check of b's merge running; d's fix-up running; d's fixed merge made but
// not on the branch; every branch decided but the integration branch not
// in the checkout. The command whose land was cut exits 3 saying to run
// it again. Each time the daemon
// restarts and `aimi swarm land` is run again (the design: a land goes on
// when it is asked to, never by itself), and goes on. At the end: one
// merge commit per landed branch on the first-parent chain (none made
// twice), every landed story's commit reachable, the held branch's commits
// kept on its own branch, each land run (check, fix-up) started once, and
// the outcomes the first land would have given (landed and verified,
// fixed, held); and the land's costs are those `aimi swarm usage` gives.
func TestLandKill9LoopsThroughALand(t *testing.T) {
	parallel(t)
	ids := map[string]string{"a": "US-101", "b": "US-201", "c": "US-301", "d": "US-401", "e": "US-501"}
	files := map[string]string{"a": "a.txt", "b": "b.txt", "c": "shared.txt", "d": "shared.txt", "e": "shared.txt"}
	// a's agent and d's fix-up's report a cost (the demo agent has none
	// of its own): the costs the land shows are not all zero.
	extra := map[string]string{"a": "Paid for " + demoagent.MarkerCost, "d": "Kept as written " + demoagent.MarkerSlowFix + " " + demoagent.MarkerCost,
		"e": "Kept as written " + demoagent.MarkerRefuseFix}
	tasks := map[string][]byte{}
	for n, f := range files {
		var x []string
		if extra[n] != "" {
			x = append(x, extra[n])
		}
		tasks[n] = landTaskFile(n, f, ids[n], x...)
	}
	verify := "AIMI_LAND_VERIFY_COMMAND=" + killVerify
	pauseEnv := func(s killStop) []string {
		if s.pause == "" {
			return []string{verify}
		}
		return []string{verify, aimid.EnvLandPause + "=" + string(s.pause) + s.of}
	}
	stops := []killStop{
		{what: "mid-merge: the merge commit made, the integration branch not moved", pause: land.PointMergeMade},
		{what: "mid-merge: the integration branch moved, the record not written", pause: land.PointMergeMoved},
	}
	ls := startLandSwarm(t, tasks, true, pauseEnv(stops[0])...)
	sw := validState(t, ls.repo)
	name := map[string]string{}
	var order []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		name[n] = containerOf(t, sw, n).ContainerName
		order = append(order, name[n])
	}
	stops = append(stops,
		killStop{what: "mid-verify: the check of b's merge running, done while aimid is down", seen: landOutcome(name["b"], api.LandVerifying),
			run: struct{ taskFile, command string }{land.VerifyTaskPath(name["b"]), "sleep 25"}},
		killStop{what: "mid-fix-up: d's fix-up running", seen: landOutcome(name["d"], api.LandFixing)},
		killStop{what: "mid-merge: d's fixed merge made, the integration branch not moved", pause: land.PointMergeMade, of: ":" + name["d"]},
		killStop{what: "after the last merge, before the checkout", pause: land.PointAllLanded},
	)
	for i, s := range stops {
		killLandAt(t, ls, order, s)
		next := killStop{}
		if i+1 < len(stops) {
			next = stops[i+1]
		}
		ls.p = ls.launch(t, pauseEnv(next)...)
		v := waitFor(t, ls.sock, ls.repo, time.Minute, "the record of the land cut "+s.what, func(v api.SwarmView) bool { return v.Land != nil })
		if v.Land.Running || !v.Land.Cut {
			t.Errorf("after the kill %s the land shows as running, or not as cut short: %+v", s.what, v.Land)
		}
		if b := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+v.Land.Branch); b != "" {
			t.Errorf("after the kill %s the integration branch is in the checkout before the land ended", s.what)
		}
	}
	code, out, errOut := ls.aimi("swarm", "land", "--order", strings.Join(order, ","), "--json")
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("the land after the last restart: %d %v, want exit 1 (e held)\n%s\n%s", code, err, out, errOut)
	}
	checkKilledLand(t, ls, rep, order, name, ids)
	checkLandCosts(t, ls, name)
}

// checkLandCosts: status --json's land gives each branch's container's
// cost as `aimi swarm usage --json` has it, its checks' and fix-ups'
// apart, and the land's own as the sum of those.
func checkLandCosts(t *testing.T, ls *landSwarm, name map[string]string) {
	t.Helper()
	code, out, errOut := ls.aimi("swarm", "usage", "--json")
	var u cli.UsageReport
	if err := json.Unmarshal([]byte(out), &u); err != nil || code != 0 {
		t.Fatalf("usage: %d %v\n%s\n%s", code, err, out, errOut)
	}
	cost := map[string]float64{}
	for _, c := range u.Containers {
		cost[c.Name] = c.Cost
	}
	code, out, errOut = ls.aimi("swarm", "status", "--json")
	var st struct{ Land *api.LandReport }
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Land == nil {
		t.Fatalf("status --json: %d %v, want its land\n%s\n%s", code, err, out, errOut)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	sw := validState(t, ls.repo)
	var runs float64
	for _, r := range st.Land.Results {
		var own float64 // its checks' and fix-ups'
		for _, c := range sw.Containers {
			if c.TaskFilePath == land.FixupTaskPath(r.Container) || c.TaskFilePath == land.VerifyTaskPath(r.Container) {
				own += cost[c.ContainerName]
			}
		}
		if !near(r.Cost, cost[r.Container]) || !near(r.RunsCost, own) {
			t.Errorf("%s costs %v (its land runs %v) in the land, %v (%v) in aimi swarm usage", r.Container, r.Cost, r.RunsCost, cost[r.Container], own)
		}
		runs += r.RunsCost
	}
	if !near(st.Land.Cost, runs) {
		t.Errorf("the land's cost %v, want its checks' and fix-ups' %v", st.Land.Cost, runs)
	}
	a, d := resultOf(*st.Land, name["a"]), resultOf(*st.Land, name["d"])
	if !near(a.Cost, demoagent.DemoCost) || !near(d.RunsCost, demoagent.DemoCost) || !near(d.Cost, demoagent.DemoCost) {
		t.Errorf("a costs %v, d %v and its fix-up %v; want each %v, the cost their agents reported", a.Cost, d.Cost, d.RunsCost, demoagent.DemoCost)
	}
}

// containerIDOf is the engine's id of the swarm's container of taskFile.
func containerIDOf(t *testing.T, v api.SwarmView, taskFile string) string {
	t.Helper()
	for _, d := range v.Containers {
		if d.TaskFile == taskFile && d.ContainerID != "" {
			return d.ContainerID
		}
	}
	t.Fatalf("no container of %s in %+v", taskFile, v.Containers)
	return ""
}

// waitProcess waits until a process whose command line holds command
// runs (running) or no longer does in the container id.
func waitProcess(t *testing.T, id, command string, running bool) {
	t.Helper()
	eng := dockertest.Client(t)
	testwait.Eventually(t, 3*time.Minute, fmt.Sprintf("%q running=%v in %.12s", command, running, id), func() error {
		found := false
		top, err := eng.ContainerTop(context.Background(), id, nil)
		if err != nil {
			// A container that exited runs nothing.
			if info, ierr := eng.ContainerInspect(context.Background(), id); ierr != nil || info.State.Running {
				return err
			}
		} else {
			found = slices.ContainsFunc(top.Processes, func(p []string) bool { return strings.Contains(strings.Join(p, " "), command) })
		}
		if found != running {
			return fmt.Errorf("processes %v", top.Processes)
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
}

// landOutcome: the land's record shows container at outcome.
func landOutcome(container, outcome string) func(api.SwarmView) bool {
	return func(v api.SwarmView) bool {
		return v.Land != nil && v.Land.Running && slices.ContainsFunc(v.Land.Results, func(r api.LandResult) bool {
			return r.Container == container && r.Outcome == outcome
		})
	}
}

// killLandAt runs `aimi swarm land` and kills aimid with SIGKILL once the
// land reached s.
func killLandAt(t *testing.T, ls *landSwarm, order []string, s killStop) {
	t.Helper()
	landDone := make(chan int, 1)
	var landErr string
	go func() {
		code, _, errOut := ls.aimi("swarm", "land", "--order", strings.Join(order, ","))
		landErr = errOut
		landDone <- code
	}()
	if s.pause != "" {
		testwait.Eventually(t, 5*time.Minute, "the land stopped "+s.what, func() error {
			paused := func(line string) bool {
				return strings.Contains(line, aimid.LogLandPaused) && strings.Contains(line, "point="+string(s.pause)) &&
					(s.of == "" || strings.Contains(line, "container="+s.of[1:]))
			}
			if logs := ls.p.logs(); !slices.ContainsFunc(strings.Split(logs, "\n"), paused) {
				select {
				case code := <-landDone:
					t.Fatalf("the land ended (exit %d) before it reached %s:\n%s", code, s.pause, logs)
				default:
				}
				return testwait.ErrNotYet
			}
			return nil
		})
	} else {
		v := waitFor(t, ls.sock, ls.repo, 5*time.Minute, "the land "+s.what, s.seen)
		if s.run.command != "" {
			id := containerIDOf(t, v, s.run.taskFile)
			waitProcess(t, id, s.run.command, true)
			defer waitProcess(t, id, s.run.command, false) // aimid stays down meanwhile
		}
	}
	ls.p.cmd.Process.Signal(syscall.SIGKILL)
	ls.p.wait(t)
	// The command whose land was cut says so, and what to do.
	if code := <-landDone; code != 3 || !strings.Contains(landErr, "run 'aimi swarm land' again") {
		t.Errorf("the land cut %s: exit %d, want 3 and what to do:\n%s", s.what, code, landErr)
	}
	t.Logf("killed aimid %s", s.what)
}

// checkKilledLand: the land's end after every kill is the one no kill
// would have given.
func checkKilledLand(t *testing.T, ls *landSwarm, rep api.LandReport, order []string, name, ids map[string]string) {
	t.Helper()
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Container)
	}
	if !slices.Equal(got, order) {
		t.Errorf("landing order %v, want %v", got, order)
	}
	for n, want := range map[string]string{"a": "landed passed", "b": "landed passed", "c": "landed passed", "d": "fixed ", "e": "held "} {
		if r := resultOf(rep, name[n]); r.Outcome+" "+r.Verify != want {
			t.Errorf("%s: %+v, want %q (outcome, check)", n, r, want)
		}
	}
	if e := resultOf(rep, name["e"]); !slices.Equal(e.Files, []string{"shared.txt"}) || e.Merge != "" || !strings.Contains(e.Reason, "fix-up") {
		t.Errorf("e: %+v, want held for a conflict on shared.txt its fix-up did not resolve", e)
	}
	// The first-parent chain: one merge per landed branch, in order, each
	// bringing that branch's tip, none twice.
	chain := gitOut(t, ls.repo, "rev-list", "--first-parent", "--reverse", "--parents", ls.base+".."+rep.Branch)
	var merges [][]string
	for line := range strings.SplitSeq(chain, "\n") {
		merges = append(merges, strings.Fields(line))
	}
	if len(merges) != 4 {
		t.Fatalf("%s holds %d commits on its first-parent chain, want the 4 merges:\n%s", rep.Branch, len(merges), chain)
	}
	prev := ls.base
	for i, n := range []string{"a", "b", "c", "d"} {
		r := resultOf(rep, name[n])
		if m := merges[i]; len(m) != 3 || m[0] != r.Merge || m[1] != prev || m[2] != r.Tip {
			t.Errorf("merge %d of %s is %v, want %s of %s onto %s", i+1, rep.Branch, m, r.Merge, r.Tip, prev)
		}
		prev = r.Merge
		if !isAncestor(ls.repo, r.Tip, rep.Branch) {
			t.Errorf("%s's commits are not all on %s", n, rep.Branch)
		}
	}
	log := gitOut(t, ls.repo, "log", "--format=%B", ls.base+".."+rep.Branch)
	for _, n := range []string{"a", "b", "c", "d"} {
		if !strings.Contains(log, ids[n]) {
			t.Errorf("no commit of %s on %s", ids[n], rep.Branch)
		}
	}
	e := resultOf(rep, name["e"])
	if got := gitOutOrEmpty(ls.repo, "rev-parse", "refs/heads/"+e.Branch); got != e.Tip || !strings.Contains(gitOut(t, ls.repo, "log", "--format=%B", e.Tip), ids["e"]) {
		t.Errorf("the held branch %s is at %q, want its tip %s with %s", e.Branch, got, e.Tip, ids["e"])
	}
	if isAncestor(ls.repo, e.Tip, rep.Branch) {
		t.Errorf("the held branch's work is on %s", rep.Branch)
	}
	runs := map[string]int{}
	for _, c := range validState(t, ls.repo).Containers {
		if land.IsLandRun(c.TaskFilePath) {
			runs[c.TaskFilePath]++
		}
	}
	want := map[string]int{land.VerifyTaskPath(name["a"]): 1, land.VerifyTaskPath(name["b"]): 1, land.VerifyTaskPath(name["c"]): 1,
		land.FixupTaskPath(name["d"]): 1, land.FixupTaskPath(name["e"]): 1}
	if !maps.Equal(runs, want) {
		t.Errorf("the land's runs %v, want each check and fix-up once: %v", runs, want)
	}
}

// isAncestor: commit is in rev's history in repo.
func isAncestor(repo, commit, rev string) bool {
	return exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", commit, rev).Run() == nil
}

// resultOf is container's entry in rep.
func resultOf(rep api.LandReport, container string) api.LandResult {
	for _, r := range rep.Results {
		if r.Container == container {
			return r
		}
	}
	return api.LandResult{}
}
