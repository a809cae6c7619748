package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// partly is a completed container whose second of three stories failed
// and whose third was skipped behind it.
func partly(name string) *state.Container {
	c := ctr(name, state.StatusCompleted, 1, 3)
	c.StoryProgress = state.Progress{Total: 3, Completed: 1, Failed: 1}
	return c
}

func TestStatusSummarySaysCompletedWithFailures(t *testing.T) {
	var b bytes.Buffer
	RenderStatus(&b, swarmView("/r", ctr("aimi-a", state.StatusCompleted, 2, 2), partly("aimi-b")).State)
	out := b.String()
	if !strings.HasSuffix(out, "Summary: 1 completed, 1 completed with failures (2 total)\n") {
		t.Errorf("summary does not tell the two apart:\n%s", out)
	}
	// The table keeps the file's status: the spec's completed.
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "aimi-b .aimi/tasks/b-tasks.json feat/aimi-b completed 1/3 1 failed, 1 skipped") {
		t.Errorf("row of the completed container with failures:\n%s", out)
	}
}

func TestFollowExitsOneWhenAContainerCompletedWithFailedStories(t *testing.T) {
	repo := taskRepo(t, "a-tasks.json", "b-tasks.json")
	for _, tt := range []struct {
		name  string
		last  []*state.Container
		code  int
		words string
	}{
		{"a failed story makes exit 1 and says so", []*state.Container{ctr("aimi-a", state.StatusCompleted, 2, 2), partly("aimi-b")},
			ExitInvalid, "1 completed with failed stories; see 'aimi swarm logs NAME', and rerun what failed with 'aimi swarm resume --retry-failed'"},
		{"both kinds are named", []*state.Container{ctr("aimi-a", state.StatusFailed, 0, 2), partly("aimi-b")},
			ExitInvalid, "1 container(s) failed, 1 completed with failed stories"},
		{"stories skipped by hand are no failure", []*state.Container{ctr("aimi-a", state.StatusCompleted, 2, 2), func() *state.Container {
			c := ctr("aimi-b", state.StatusCompleted, 1, 2)
			c.StoryProgress.Pending = 0 // the other is skipped: it counts in no counter
			return c
		}()}, ExitOK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := daemontest.Serve(t, progressing(repo,
				[]*state.Container{ctr("aimi-a", state.StatusPending, 0, 2), ctr("aimi-b", state.StatusPending, 0, 3)}, tt.last))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := runAimi(ctx, nil, nil, "swarm", "start", "--all", "--follow", "--refresh", "10ms", "--repo", repo, "--socket", sock)
			if r.code != tt.code || !strings.Contains(r.err, tt.words) {
				t.Fatalf("exit %d, want %d saying %q; stderr %q\n%s", r.code, tt.code, tt.words, r.err, r.out)
			}
		})
	}
}
