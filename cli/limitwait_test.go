package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// A container whose model calls wait at the gateway: the table says so,
// --json stays the state file's shape, --json --detail carries the wait.
func TestSwarmStatusShowsLimitWaits(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	until := time.Date(2026, 11, 26, 3, 12, 40, 0, time.UTC)
	text := "waiting for anthropic limit until " + until.Local().Format(time.TimeOnly)
	fake := &daemontest.Swarms{StatusFunc: func(string) (api.SwarmView, error) {
		v := swarmView(repo, ctr("aimi-a", state.StatusRunning, 0, 2))
		v.Containers = []api.ContainerDetail{{Name: "aimi-a", Status: "running", LimitWaits: []api.LimitWait{
			{Provider: "anthropic", Reason: "limit", Until: &until, Since: until.Add(-time.Minute), Calls: 2, Text: text + "\x1b[2J"},
		}}}
		return v, nil
	}}
	sock, _ := daemontest.Serve(t, fake)
	r := runAimi(context.Background(), nil, nil, "swarm", "status", "--repo", repo, "--socket", sock)
	if r.code != 0 || !strings.Contains(r.out, "aimi-a  "+text) || !strings.Contains(r.out, "(2 call(s), since ") || strings.Contains(r.out, "\x1b") {
		t.Fatalf("table: exit %d\n%q\n%s", r.code, r.out, r.err)
	}
	r = runAimi(context.Background(), nil, nil, "swarm", "status", "--json", "--repo", repo, "--socket", sock)
	if r.code != 0 || strings.Contains(r.out, "limitWaits") {
		t.Fatalf("--json is the state file's shape: exit %d\n%s", r.code, r.out)
	}
	r = runAimi(context.Background(), nil, nil, "swarm", "status", "--json", "--detail", "--repo", repo, "--socket", sock)
	var v api.SwarmView
	if r.code != 0 || json.Unmarshal([]byte(r.out), &v) != nil || v.State == nil || len(v.Containers) != 1 ||
		len(v.Containers[0].LimitWaits) != 1 || !v.Containers[0].LimitWaits[0].Until.Equal(until) {
		t.Fatalf("--json --detail: exit %d\n%s", r.code, r.out)
	}
	if r = runAimi(context.Background(), nil, nil, "swarm", "status", "--detail", "--repo", repo, "--socket", sock); r.code != ExitUsage {
		t.Errorf("--detail without --json: exit %d", r.code)
	}
}
