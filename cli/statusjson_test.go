package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// status --json prints the daemon's bytes re-indented instead of decoding
// and encoding them again; the output is what the round trip printed, for
// values that an encoding could change (HTML characters, non-ASCII text,
// nulls, times with nanoseconds, a pid, an exit code).
func TestSwarmStatusJSONPrintsWhatARoundTripPrinted(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json")
	pr, pid, code := "https://example.com/pull/1?a=1&b=<2>", 4711, 137
	a := ctr("aimi-a", state.StatusCompleted, 2, 2)
	a.PRURL, a.ACPPID = &pr, &pid
	a.UpdatedAt = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	b := ctr("aimi-b", state.StatusFailed, 1, 3)
	b.BranchName = "feat/ünïcödé-\u2028"
	view := swarmView(repo, a, b)
	view.Containers = []api.ContainerDetail{
		{Name: "aimi-a", Status: "completed", PRURL: &pr, Finished: true, Stories: []api.StoryDetail{{ID: "US-001", Title: "x & <y>", DependsOn: []string{}, Status: "completed"}}},
		{Name: "aimi-b", Status: "failed", ExitCode: &code, OOMKilled: true, Errors: []api.ErrorDetail{{Code: "CONTAINER_OOM", Message: "killed"}}},
	}
	sock, _ := daemontest.Serve(t, &daemontest.Swarms{StatusFunc: func(string) (api.SwarmView, error) { return view, nil }})
	// What the command printed when it decoded the answer and encoded it.
	body, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	var decoded api.SwarmView
	if err := json.Unmarshal(body, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		doc  any
	}{
		{"state", []string{"--json"}, decoded.State},
		{"detail", []string{"--json", "--detail"}, decoded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.MarshalIndent(tc.doc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			r := runAimi(context.Background(), nil, nil, append([]string{"swarm", "status", "--repo", repo, "--socket", sock}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if r.out != string(want)+"\n" {
				t.Errorf("printed\n%s\nwant\n%s", r.out, want)
			}
		})
	}
}
