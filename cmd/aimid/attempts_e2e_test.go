package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/demoagent"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
	"github.com/docker/docker/errdefs"
)

// attemptsSwarm is a local-mode swarm of one task file, x, whose story
// writes a.txt with [demo:attempt] (attempt K adds K lines "attempt K"),
// started with start's extra flags on a daemon with env.
func attemptsSwarm(t *testing.T, extra []string, env []string, start ...string) *landSwarm {
	t.Helper()
	return attemptsSwarmConfig(t, "", extra, env, start...)
}

// attemptsSwarmConfig is attemptsSwarm on a daemon with the config file
// config ("": a local daemon's).
func attemptsSwarmConfig(t *testing.T, config string, extra []string, env []string, start ...string) *landSwarm {
	t.Helper()
	ls := &landSwarm{img: sandboxImage(t), repo: gitRepo(t, 1)}
	criteria := append([]string{"The file says which attempt wrote it " + demoagent.MarkerAttempt}, extra...)
	if err := os.WriteFile(filepath.Join(ls.repo, ".aimi", "tasks", "x-tasks.json"), landTaskFile("x", "a.txt", "US-101", criteria...), 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, ls.repo)
	ls.base = gitOut(t, ls.repo, "rev-parse", "HEAD")
	tmp := shortDir(t)
	ls.sock, ls.data = filepath.Join(tmp, "aimid.sock"), filepath.Join(tmp, "data")
	ls.p = launch(t, daemonOpts{Sock: ls.sock, DataDir: ls.data, Image: ls.img, Local: true, Config: config, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	ls.ctx = ctx
	args := append([]string{"swarm", "start", "--all", "--local", "--max", "8"}, start...)
	if code, out, errOut := ls.aimi(args...); code != 0 {
		t.Fatalf("%v: %d\n%s\n%s", args, code, out, errOut)
	}
	t.Cleanup(func() { ls.aimi("swarm", "cleanup", "--force") })
	return ls
}

// view is the daemon's whole view of the swarm.
func (ls *landSwarm) view(t *testing.T) api.SwarmView {
	t.Helper()
	code, out, errOut := ls.aimi("swarm", "status", "--json", "--detail")
	var v api.SwarmView
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("status: %d %v\n%s\n%s", code, err, out, errOut)
	}
	return v
}

// picked waits until x's attempts are picked and the daemon is done with
// every one of them (the last to end picks and publishes before it is),
// and returns their set.
func (ls *landSwarm) picked(t *testing.T) *state.AttemptSet {
	t.Helper()
	var set *state.AttemptSet
	testwait.Eventually(t, 6*time.Minute, "x's attempts picked", func() error {
		v := ls.view(t)
		if len(v.Attempts) != 1 || v.Attempts[0].Pick == nil {
			return fmt.Errorf("no pick yet: %+v", v.Attempts)
		}
		for _, c := range v.Containers {
			if !c.Finished {
				return fmt.Errorf("%s not finished", c.Name)
			}
		}
		set = v.Attempts[0]
		return nil
	})
	return set
}

// tipOf is the commit ref names in the checkout.
func (ls *landSwarm) tipOf(t *testing.T, ref string) string {
	t.Helper()
	return gitOut(t, ls.repo, "rev-parse", "--verify", ref)
}

// TestAttemptsPickTheVerifiedAttemptAndPickOverrides: --attempts 3 of one
// task file on the real daemon, engine and runner; the verify command
// passes on attempt 2's file alone. Attempt 2 is picked (the only one
// verified), the task file's branch in the checkout is attempt 2's tip,
// attempts 1 and 3 keep their commits at refs/aimi/attempts/<swarm>/<c>,
// no attempt's own branch reaches the checkout, and the state file
// records the pick in its attempts section (valid against the schema).
// `aimi swarm pick` then makes attempt 3 the pick: the branch moves to
// its tip, and status says so.
func TestAttemptsPickTheVerifiedAttemptAndPickOverrides(t *testing.T) {
	parallelLong(t)
	ls := attemptsSwarm(t, nil, []string{"AIMI_AGENT_VERIFY_COMMAND=grep -qx 'attempt 2' a.txt"}, "--attempts", "3")
	set := ls.picked(t)
	sw := validState(t, ls.repo)
	if set.BranchName != "feat/x" || len(set.Attempts) != 3 {
		t.Fatalf("set %+v, want feat/x with 3 attempts", set)
	}
	if p := set.Pick; p.Attempt != 2 || p.By != state.PickByDaemon || p.Reason != "verified; the only one of 3" {
		t.Fatalf("pick %+v, want attempt 2 by the daemon, the only one verified", p)
	}
	for _, a := range set.Attempts {
		// The name may carry a suffix: another test's swarm holds it.
		base := fmt.Sprintf("aimi-x-a%d", a.Attempt)
		if want := fmt.Sprintf("feat/x--a%d", a.Attempt); a.BranchName != want || (a.ContainerName != base && !strings.HasPrefix(a.ContainerName, base+"-")) {
			t.Errorf("attempt %d: branch %s container %s, want %s and %s", a.Attempt, a.BranchName, a.ContainerName, want, base)
		}
		ref := contract.AttemptRef(contract.Sandbox{Swarm: sw.SwarmID, Container: a.ContainerName})
		if a.KeptRef != ref || a.Tip == "" || ls.tipOf(t, ref) != a.Tip {
			t.Errorf("attempt %d: kept %q at %q, want its commits at %s", a.Attempt, a.KeptRef, a.Tip, ref)
			continue
		}
		file := gitOut(t, ls.repo, "show", a.Tip+":a.txt")
		if want := fmt.Sprintf("attempt %d", a.Attempt); !strings.Contains(file, want) {
			t.Errorf("attempt %d's a.txt lacks %q:\n%s", a.Attempt, want, file)
		}
		if a.Qualified != (a.Attempt == 2) {
			t.Errorf("attempt %d qualified=%v", a.Attempt, a.Qualified)
		}
		if out := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", "refs/heads/"+a.BranchName); out != "" {
			t.Errorf("the attempt's own branch %s reached the checkout", a.BranchName)
		}
	}
	if got := ls.tipOf(t, "refs/heads/feat/x"); got != set.Pick.Tip || got != set.Attempts[1].Tip {
		t.Fatalf("feat/x at %s, want attempt 2's tip %s", got, set.Pick.Tip)
	}
	if file := validState(t, ls.repo); file.AttemptSet(taskPath("x")) == nil || file.AttemptSet(taskPath("x")).Pick == nil {
		t.Fatalf("the state file has no pick in its attempts section: %+v", file.Attempts)
	}

	a3 := set.Attempts[2]
	events := make(chan api.Event, 256)
	client := daemon.NewClient(ls.sock)
	defer client.Close()
	go client.Events(ls.ctx, ls.repo, func(e api.Event) error {
		select {
		case events <- e:
		default:
		}
		return nil
	})
	code, out, errOut := ls.aimi("swarm", "pick", a3.ContainerName)
	if code != 0 || !strings.Contains(out, "feat/x: attempt 3 of 3 picked by hand (picked by hand instead of attempt 2)") {
		t.Fatalf("pick %s: %d\n%s\n%s", a3.ContainerName, code, out, errOut)
	}
	if got := ls.tipOf(t, "refs/heads/feat/x"); got != a3.Tip {
		t.Fatalf("after the pick by hand feat/x is at %s, want attempt 3's tip %s", got, a3.Tip)
	}
	// The subscription may have begun after that pick: pick back and forth
	// until an attempt-picked event of attempt 3 arrives.
	testwait.Eventually(t, 2*time.Minute, "an attempt-picked event", func() error {
		for {
			select {
			case e := <-events:
				if e.Kind == api.EventAttemptPicked && e.ContainerName == a3.ContainerName && strings.Contains(e.Output, "attempt 3 of 3 picked by hand") {
					return nil
				}
				continue
			default:
			}
			break
		}
		for _, name := range []string{set.Pick.ContainerName, a3.ContainerName} {
			if _, err := client.Pick(ls.ctx, ls.repo, name); err != nil {
				t.Fatalf("pick %s: %v", name, err)
			}
		}
		return errors.New("none yet")
	})
	if p := validState(t, ls.repo).AttemptSet(taskPath("x")).Pick; p.Attempt != 3 || p.By != state.PickByHand || p.PreviousTip != set.Pick.Tip {
		t.Fatalf("state file's pick %+v, want attempt 3 by hand, off attempt 2's tip", p)
	}
	if _, out, _ := ls.aimi("swarm", "status"); !strings.Contains(out, "* "+a3.ContainerName) {
		t.Errorf("status does not mark attempt 3 picked:\n%s", out)
	}
	// A cleanup takes a losing attempt's commits to its ref before its
	// container and the git service's copy go (here: again, once deleted).
	a1 := set.Attempts[0]
	gitOut(t, ls.repo, "update-ref", "-d", a1.KeptRef)
	if code, out, errOut := ls.aimi("swarm", "cleanup"); code != 0 {
		t.Fatalf("cleanup: %d\n%s\n%s", code, out, errOut)
	}
	if got := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", a1.KeptRef); got != a1.Tip {
		t.Errorf("after the cleanup %s names %q, want attempt 1's tip %s", a1.KeptRef, got, a1.Tip)
	}
}

// TestAttemptsFirstVerifiedStopsTheRest: with --attempts-stop
// first-verified, attempt 3 takes its time ([demo:slow-attempt-3]) while
// attempt 2 passes the verify command: once 2 qualifies, 3 is stopped
// (its commits so far kept), and 2 is picked.
func TestAttemptsFirstVerifiedStopsTheRest(t *testing.T) {
	parallelLong(t)
	ls := attemptsSwarm(t, []string{"Attempt 3 dawdles " + demoagent.MarkerSlowAttempt + "3]"},
		[]string{"AIMI_AGENT_VERIFY_COMMAND=grep -qx 'attempt 2' a.txt"}, "--attempts", "3", "--attempts-stop", "first-verified")
	set := ls.picked(t)
	if set.Pick.Attempt != 2 || set.Stop != "first-verified" {
		t.Fatalf("pick %+v (stop %q), want attempt 2 under first-verified", set.Pick, set.Stop)
	}
	a3 := set.Attempts[2]
	if !a3.StoppedEarly {
		t.Errorf("attempt 3 not marked stopped early: %+v", a3)
	}
	v := ls.view(t)
	for _, c := range v.Containers {
		if c.Name == a3.ContainerName && c.Status != string(state.StatusStopped) {
			t.Errorf("attempt 3 is %s, want stopped once attempt 2 qualified", c.Status)
		}
	}
	if got := ls.tipOf(t, "refs/heads/feat/x"); got != set.Pick.Tip {
		t.Errorf("feat/x at %s, want attempt 2's tip %s", got, set.Pick.Tip)
	}
}

// TestAttemptsScoreCommandDecides: attempts 2 and 3 both pass the verify
// command; attempt 2 changed fewer lines, but swarm.score_command (run on
// each tip in a sealed scoring sandbox of the swarm's image) prints the
// attempt's number, so attempt 3 wins on its score. No scoring sandbox is
// left behind.
func TestAttemptsScoreCommandDecides(t *testing.T) {
	parallelLong(t)
	ls := attemptsSwarm(t, nil, []string{
		"AIMI_AGENT_VERIFY_COMMAND=grep -q '^attempt [23]$' a.txt",
		`AIMI_SWARM_SCORE_COMMAND=sed -n 's/^attempt //p' a.txt | head -n 1`,
	}, "--attempts", "3")
	set := ls.picked(t)
	if p := set.Pick; p.Attempt != 3 || !strings.HasPrefix(p.Reason, "verified; score 3 vs 2") {
		t.Fatalf("pick %+v, want attempt 3 on its score", p)
	}
	if s := set.Attempts[1].Score; s == nil || *s != 2 || set.Attempts[1].Lines == nil || *set.Attempts[2].Lines <= *set.Attempts[1].Lines {
		t.Errorf("attempt 2 scored %v with %v lines, want 2 and fewer lines than attempt 3", set.Attempts[1].Score, set.Attempts[1].Lines)
	}
	if got := ls.tipOf(t, "refs/heads/feat/x"); got != set.Pick.Tip {
		t.Errorf("feat/x at %s, want attempt 3's tip %s", got, set.Pick.Tip)
	}
	for _, a := range set.Attempts {
		if _, err := dockertest.Client(t).ContainerInspect(context.Background(), a.ContainerName+"-score"); !errdefs.IsNotFound(err) {
			t.Errorf("scoring sandbox %s-score left behind (%v)", a.ContainerName, err)
		}
	}
}

// TestAttemptsLandOnlyThePick: `aimi swarm land` lands the picked attempt
// of the task file run three times (attempts 2 and 3 verified, 2 with
// fewer lines) and skips the other two, saying which is picked; a pick by
// hand after the land rewrites nothing landed (feat/x and the landed
// merge stay): attempt 3 is landed after it instead (its a.txt conflicts
// with the landed one, and the fix-up keeps both).
func TestAttemptsLandOnlyThePick(t *testing.T) {
	parallelLong(t)
	ls := attemptsSwarm(t, nil, []string{"AIMI_AGENT_VERIFY_COMMAND=grep -q '^attempt [23]$' a.txt", "AIMI_LAND_VERIFY_COMMAND=true"}, "--attempts", "3")
	set := ls.picked(t)
	a2, a3 := set.Attempts[1], set.Attempts[2]
	if set.Pick.Attempt != 2 || !strings.Contains(set.Pick.Reason, "lines") {
		t.Fatalf("pick %+v, want attempt 2 on its fewer lines", set.Pick)
	}
	code, out, errOut := ls.aimi("swarm", "land", "--json")
	var rep api.LandReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("land: %d %v\n%s\n%s", code, err, out, errOut)
	}
	if len(rep.Results) != 1 || rep.Results[0].Container != a2.ContainerName || rep.Results[0].Outcome != "landed" {
		t.Fatalf("land results %+v, want attempt 2 alone, landed", rep.Results)
	}
	skipped := map[string]string{}
	for _, k := range rep.Skipped {
		skipped[k.Name] = k.Reason
	}
	for _, a := range []state.Attempt{set.Attempts[0], a3} {
		if !strings.Contains(skipped[a.ContainerName], "not picked (attempt 2 is") {
			t.Errorf("%s skipped for %q, want not picked", a.ContainerName, skipped[a.ContainerName])
		}
	}
	landed := ls.tipOf(t, "refs/heads/"+rep.Branch)
	if code, out, errOut := ls.aimi("swarm", "pick", a3.ContainerName); code != 0 {
		t.Fatalf("pick after the land: %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, ls.sock, ls.repo, 5*time.Minute, "attempt 3 landed after the land", func(v api.SwarmView) bool {
		if v.Land == nil || v.Land.Running {
			return false
		}
		for _, r := range v.Land.Results {
			if r.Container == a3.ContainerName && (r.Outcome == "landed" || r.Outcome == "fixed") {
				return true
			}
		}
		return false
	})
	if got := ls.tipOf(t, "refs/heads/feat/x"); got != a2.Tip {
		t.Errorf("feat/x moved to %s after a pick by hand of a landed task file, want it at attempt 2's %s", got, a2.Tip)
	}
	if base := gitOut(t, ls.repo, "merge-base", landed, "refs/heads/"+v.Land.Branch); base != landed {
		t.Errorf("the integration branch lost the landed merge %s", landed)
	}
}

// TestAttemptsGoRoundTheVariants: agent.variants left and right; attempts
// 1 and 3 run left, 2 runs right, each told AIMI_VARIANT and given its
// variant's environment. The verify command passes only where both say
// right: attempt 2 is picked, and the set names each attempt's variant.
func TestAttemptsGoRoundTheVariants(t *testing.T) {
	parallelLong(t)
	cfg := "agent:\n  kind: demo\n  variants:\n    - name: left\n      env: {X_SIDE: left}\n    - name: right\n      env: {X_SIDE: right}\ngit:\n  mode: local\n"
	ls := attemptsSwarmConfig(t, cfg, nil,
		[]string{`AIMI_AGENT_VERIFY_COMMAND=test "$AIMI_VARIANT" = right && test "$X_SIDE" = right`}, "--attempts", "3")
	set := ls.picked(t)
	if set.Pick.Attempt != 2 {
		t.Fatalf("pick %+v, want attempt 2 (the right variant)", set.Pick)
	}
	for i, want := range []string{"left", "right", "left"} {
		if got := set.Attempts[i].Variant; got != want {
			t.Errorf("attempt %d ran variant %q, want %q", i+1, got, want)
		}
	}
}
