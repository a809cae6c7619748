package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// TestLandAutoGrowsTheTrainWhileOthersWork: with land.auto, a container's
// branch lands on the swarm's integration branch as soon as it completes,
// while another still works; the radar then warns of that other branch's
// conflict with what has landed (onto the integration branch), and the
// integration branch is in the checkout.
func TestLandAutoGrowsTheTrainWhileOthersWork(t *testing.T) {
	parallel(t)
	ls := startLandSwarm(t, map[string][]byte{"quick": landTaskFile("quick", "shared.txt", "US-101"), "slow": radarTaskFile("slow", "shared.txt", 200)},
		false, "AIMI_LAND_AUTO=true")
	repo, sock, ctx := ls.repo, ls.sock, ls.ctx
	var quick, slow string
	v := waitFor(t, sock, repo, 6*time.Minute, "quick landed and slow warned of its conflict with it", func(v api.SwarmView) bool {
		for _, c := range v.Containers {
			switch {
			case strings.HasSuffix(c.TaskFile, "quick-tasks.json"):
				quick = c.Name
			case strings.HasSuffix(c.TaskFile, "slow-tasks.json"):
				slow = c.Name
			}
		}
		if v.Land == nil {
			return false
		}
		landed := slices.ContainsFunc(v.Land.Results, func(r api.LandResult) bool { return r.Container == quick && r.Outcome == "landed" })
		warned := slices.ContainsFunc(v.Conflicts, func(c api.Conflict) bool {
			return c.Kind == "conflict" && c.Onto == v.Land.Branch && slices.Equal(c.Containers, []string{slow})
		})
		return landed && warned
	})
	for _, c := range v.Containers {
		if c.Name == slow && c.Status != "running" {
			t.Errorf("%s is %s, want it still working while %s landed", slow, c.Status, quick)
		}
	}
	if got := gitOut(t, repo, "show", v.Land.Branch+":shared.txt"); !strings.Contains(got, "US-101") {
		t.Errorf("%s in the checkout lacks quick's work: %q", v.Land.Branch, got)
	}
	aimi(ctx, "swarm", "stop", slow, "--repo", repo, "--socket", sock)
}
