package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/land"
)

// radarOriginGit is the git of the radar's conversations with origin: the
// user's configuration (credentials), at the radar's priority.
var radarOriginGit = gitcmd.Git{Env: originGit.Env, Nice: radarNice}

// radarSource is where the radar reads the swarm's tips: the git service
// in local mode; in remote mode the daemon's copy of origin, whose
// branches of the swarm that moved are fetched first (cpu: that git's).
// nil: nothing to look at yet.
func (sw *swarm) radarSource(ctx context.Context) (receivedTips, time.Duration, error) {
	if sw.local {
		src, ok := sw.m.cfg.Git.(TipSource)
		if !ok {
			return nil, 0, errors.New("no git service (git.mode: local) to read the branches from")
		}
		return src, 0, nil
	}
	if !sw.checkoutFetchedOrigin(ctx) {
		return nil, 0, nil
	}
	o, err := sw.originCopyOf(ctx)
	if err != nil {
		return nil, 0, err
	}
	branches := []string{o.onto}
	for _, c := range sw.list() {
		if !land.IsLandRun(c.taskFile) {
			branches = append(branches, c.branch)
		}
	}
	cpu, err := o.sync(ctx, radarOriginGit, branches...)
	return o, cpu, err
}

// radarOnMessage wakes a remote-mode swarm's radar after a message that
// follows a push to origin: a story's progress-update, completed or failed
// (the runner commits and pushes each story's work before it reports the
// story; its last push at the end only carries what such a push missed).
// The look, on the radar's goroutine, asks origin; this returns at once.
// In local mode the git service's OnTip wakes it.
func (sw *swarm) radarOnMessage(c *ctr, m *acpmsg.Message) {
	if sw.local || m == nil || land.IsLandRun(c.taskFile) {
		return
	}
	if p, ok := m.Payload.(*acpmsg.ProgressUpdate); ok && (p.Status == acpmsg.StoryCompleted || p.Status == acpmsg.StoryFailed) {
		sw.radarKick()
	}
}

// checkoutFetchedOrigin reports whether the swarm's checkout has fetched
// from origin (a ref under refs/remotes/origin/): the origin remote mode
// reads task files from. The radar asks origin on its own only then; a
// checkout whose origin was never fetched may name a server nobody runs.
func (sw *swarm) checkoutFetchedOrigin(ctx context.Context) bool {
	out, err := landGit.Run(ctx, sw.repo, "for-each-ref", "--count=1", "--format=%(refname)", "refs/remotes/origin/")
	return err == nil && out != ""
}
