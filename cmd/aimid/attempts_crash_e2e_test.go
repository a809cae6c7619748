package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/aimid"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/state"
)

// attemptsVerify passes on attempt 2's file alone.
const attemptsVerify = "AIMI_AGENT_VERIFY_COMMAND=grep -qx 'attempt 2' a.txt"

// TestAttemptsPickIsUndoneOrDoneAcrossKill9: aimid is killed with SIGKILL
// at both points of a pick (the test hook AIMI_TEST_PICK_PAUSE holds it
// there). Killed before the pick's state write, nothing was picked: no
// pick in the state file, no feat/x. The next daemon picks (attempt 2)
// and is killed after the write, before the publish: the pick is in the
// file, feat/x not yet. The third finishes that very pick (its time
// unchanged, not picked again): feat/x is attempt 2's tip.
func TestAttemptsPickIsUndoneOrDoneAcrossKill9(t *testing.T) {
	parallelLong(t)
	ls := attemptsSwarm(t, nil, []string{attemptsVerify, aimid.EnvPickPause + "=" + orchestrator.PickPauseBefore}, "--attempts", "3")
	kill := func(what string) {
		t.Helper()
		testwait.Eventually(t, 5*time.Minute, what, func() error {
			if !strings.Contains(ls.p.logs(), orchestrator.LogPickPaused) {
				return fmt.Errorf("the pick is not held yet")
			}
			return nil
		})
		ls.p.cmd.Process.Signal(syscall.SIGKILL)
		ls.p.wait(t)
	}
	kill("the pick held before its write")
	if set := validState(t, ls.repo).AttemptSet(taskPath("x")); set == nil || set.Pick != nil || len(set.Attempts) != 3 {
		t.Fatalf("after a kill before the write the file's attempts are %+v, want 3 attempts and no pick", set)
	}
	if got := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", "refs/heads/feat/x"); got != "" {
		t.Fatalf("feat/x exists (%s) with no pick written", got)
	}

	ls.p = ls.launch(t, attemptsVerify, aimid.EnvPickPause+"="+orchestrator.PickPauseAfter)
	kill("the pick held after its write")
	set := validState(t, ls.repo).AttemptSet(taskPath("x"))
	if set == nil || set.Pick == nil || set.Pick.Attempt != 2 || set.Pick.By != state.PickByDaemon {
		t.Fatalf("after a kill after the write the file's pick is %+v, want attempt 2", set)
	}
	if got := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", "refs/heads/feat/x"); got != "" {
		t.Fatalf("feat/x exists (%s) before the publish", got)
	}

	ls.p = ls.launch(t, attemptsVerify)
	testwait.Eventually(t, 2*time.Minute, "feat/x at attempt 2's tip", func() error {
		if got := gitOutOrEmpty(ls.repo, "rev-parse", "--verify", "refs/heads/feat/x"); got != set.Pick.Tip {
			return fmt.Errorf("feat/x at %q, want %s", got, set.Pick.Tip)
		}
		return nil
	})
	if again := ls.picked(t); !again.Pick.At.Equal(set.Pick.At) || again.Pick.Tip != set.Pick.Tip {
		t.Errorf("the restarted daemon picked again: %+v, the file had %+v", again.Pick, set.Pick)
	}
}
