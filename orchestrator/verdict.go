package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
// the previous run finished (completed, skipped or failed) stay so, as the
// branch's task file has them. The rerun's runner clones the branch and
// never reports its completed stories again; without this its completion
// would contradict a fold that still has them pending. It retries the
// failed ones (failed -> in_progress) and reopens those skipped behind
// them, which the fold does too (state.NewTracker).
func keepFinished(tf *tasks.File, prev map[string]tasks.Status) *tasks.File {
	if tf == nil || len(prev) == 0 {
		return tf
	}
	out := *tf
	out.UserStories = slices.Clone(tf.UserStories)
	for i, s := range out.UserStories {
		if p := prev[s.ID]; p == tasks.Completed || p == tasks.Skipped || p == tasks.Failed {
			out.UserStories[i].Status = p
		}
	}
	return &out
}

// rerunBase is the task file a container's fold is restored on: tf with
// the stories its earlier runs finished kept so (keepFinished, as the
// rerun began), read from the journals those runs left next to jpath
// (moveAside), oldest first. A container never rerun has none: tf.
func rerunBase(jpath string, tf *tasks.File) *tasks.File {
	if tf == nil {
		return nil
	}
	ents, err := os.ReadDir(filepath.Dir(jpath))
	if err != nil {
		return tf
	}
	prefix := filepath.Base(jpath) + runSuffix
	var runs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && !e.IsDir() {
			runs = append(runs, filepath.Join(filepath.Dir(jpath), e.Name()))
		}
	}
	slices.Sort(runs) // the suffix is a fixed-width UTC time
	base := tf
	for _, r := range runs {
		t, _, err := state.RestoreTracker(r, base)
		if err != nil {
			continue
		}
		base = keepFinished(base, t.Stories())
	}
	return base
}
