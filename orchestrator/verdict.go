package orchestrator

import (
	"context"
	"slices"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// failRejected fails a container whose message the fold refused with a code
// (a completion the story progress does not back): the daemon journals an
// error with that code and the refusal as its message, and folds it, so the
// container ends failed and a restart reads the same from the journal.
func (sw *swarm) failRejected(ctx context.Context, c *ctr, res lineResult) {
	m := errorMsg(sw, c, res.code, res.rejected)
	rej, err := sw.led.daemon(ctx, c.name, m)
	if err != nil || rej != "" {
		sw.m.log.Warn("could not fail the container after a rejected message", "swarm", sw.id, "container", c.name,
			"code", res.code, "err", err, "rejected", rej)
		return
	}
	sw.noteMessage(c, lineResult{msg: &m})
	e := api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: c.name, Kind: api.EventProgress, Status: string(state.StatusFailed)}
	fillMessage(&e, &m)
	sw.m.publish(e)
}

// keepFinished is the task file a rerun's fold starts from: the stories
// the previous run finished (completed or skipped) stay so. The rerun's
// runner clones the branch, whose task file has them finished, and never
// reports them again; without this its completion would contradict a fold
// that still has them pending.
func keepFinished(tf *tasks.File, prev map[string]tasks.Status) *tasks.File {
	if tf == nil || len(prev) == 0 {
		return tf
	}
	out := *tf
	out.UserStories = slices.Clone(tf.UserStories)
	for i, s := range out.UserStories {
		if p := prev[s.ID]; p == tasks.Completed || p == tasks.Skipped {
			out.UserStories[i].Status = p
		}
	}
	return &out
}
