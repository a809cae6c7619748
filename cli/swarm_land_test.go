package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// A land whose answer never came says it was cut short and that running
// it again goes on; an answer the daemon gave, or no daemon at all, is
// left as it is.
func TestLandCutSaysToRunItAgain(t *testing.T) {
	var ee *ExitError
	if err := landCut(errors.New("POST /v1/swarms/land on s: " + io.EOF.Error())); !errors.As(err, &ee) || ee.Code != ExitDaemon || !strings.Contains(err.Error(), "run 'aimi swarm land' again") {
		t.Errorf("daemon gone: %v", err)
	}
	if err := landCut(context.Canceled); !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "goes on where it stopped") {
		t.Errorf("interrupted: %v", err)
	}
	ae := &api.APIError{Status: 400}
	if err := landCut(ae); err != ae {
		t.Errorf("an answer of the daemon: %v", err)
	}
	un := &daemon.UnreachableError{Socket: "s", Err: errors.New("no such file")}
	if err := landCut(un); err != un {
		t.Errorf("no daemon: %v", err)
	}
}

// The land's report says each branch's cost, its checks' and fix-ups'
// apart, and the land's own.
func TestLandReportSaysTheCosts(t *testing.T) {
	var b strings.Builder
	printLand(&b, api.LandReport{Onto: "main", Branch: "aimi/land/x", Cost: 0.0125, Take: "git merge --ff-only aimi/land/x", Results: []api.LandResult{
		{Container: "aimi-a", Branch: "feat/a", Outcome: "landed", Merge: "abc", Cost: 0.5},
		{Container: "aimi-b", Branch: "feat/b", Outcome: "fixed", Merge: "def", Cost: 0.25, RunsCost: 0.0125},
	}})
	for _, want := range []string{"aimi-a (feat/a) merge abc, cost 0.5000\n", "aimi-b (feat/b) merge def, cost 0.2500 + 0.0125 in its checks and fix-ups\n",
		"The land's own cost (its checks and fix-ups): 0.0125\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report without %q:\n%s", want, b.String())
		}
	}
}
