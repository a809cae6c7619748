package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

func TestUsageTotalsEachTaskFilesAttempts(t *testing.T) {
	v := api.SwarmView{Attempts: []*state.AttemptSet{{TaskFilePath: "x", BranchName: "feat/x", Attempts: []state.Attempt{
		{Attempt: 1, ContainerName: "aimi-x-a1"}, {Attempt: 2, ContainerName: "aimi-x-a2"}}}}}
	cs := []ContainerUsage{
		{Name: "aimi-x-a1", UsageTotals: UsageTotals{Calls: 2, Cost: 0.5}},
		{Name: "aimi-x-a2", UsageTotals: UsageTotals{Calls: 3, Cost: 0.25}},
		{Name: "aimi-y", UsageTotals: UsageTotals{Calls: 1, Cost: 1}},
	}
	rep := UsageReport{Containers: cs, Attempts: attemptsUsage(v, cs)}
	if len(rep.Attempts) != 1 || rep.Attempts[0].Calls != 5 || rep.Attempts[0].Cost != 0.75 {
		t.Fatalf("attempts usage %+v", rep.Attempts)
	}
	var b bytes.Buffer
	printUsage(&b, rep)
	if !strings.Contains(b.String(), "feat/x (2 attempts)") || !strings.Contains(b.String(), "0.7500") {
		t.Errorf("usage table lacks the attempts' total:\n%s", b.String())
	}
}
