package swarmmode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/aimi-tools/swarm/engine"
)

// A task its node could not start (rejected, or failed before its program
// ran: a node busy unmounting, shutting down, missing an image) did no
// work, yet Swarm mode's own restart cannot help: the service's restart
// condition is none, so that a runner that ran is never run again. The
// engine starts such a task again itself, with a forced update of the
// service (a job's update starts a new iteration, with a new task), a
// bounded number of times and never after a stop. The service's
// ForceUpdate counts the retries asked, and each task carries the spec it
// was made with: which attempt a task is needs nothing but the cluster's
// state, so a restarted daemon counts on where the last one stopped.
const (
	// maxStartAttempts bounds how often a sandbox's task is started.
	maxStartAttempts = 3
	// startRetryBackoff, times the attempts made, is how long after a
	// failed start the next one begins: a node busy for a moment is given
	// that moment.
	startRetryBackoff = 2 * time.Second
)

// startVerdict is what to do about a sandbox's own task.
type startVerdict int

const (
	startFinal   startVerdict = iota // report the task as it is
	startAsked                       // a later attempt was asked for; its task is not listed yet
	startBackoff                     // a later attempt is due once the backoff passed
	startDue                         // start the next attempt now
)

// attempt is which start of its sandbox a task is. Only a retry changes
// ForceUpdate on a service that is not stopped; a stop's update does too,
// but a stopped service's own task was made before it.
func attempt(t swarm.Task) int { return int(t.Spec.ForceUpdate) + 1 }

// startFailed reports whether a task ended without its program running.
func startFailed(t swarm.Task) bool {
	switch t.Status.State {
	case swarm.TaskStateRejected:
		return true
	case swarm.TaskStateFailed:
		return neverRan(t)
	}
	return false
}

// startRetry decides about the own task t of service s at now: a task
// that ran, or a stopped sandbox, is final; a start failure is retried
// until maxStartAttempts, each after its backoff. A node clock behind
// the daemon's shortens the backoff, one ahead skips it: never longer.
func startRetry(s swarm.Service, t swarm.Task, now time.Time) startVerdict {
	if !startFailed(t) || stopped(s) {
		return startFinal
	}
	if s.Spec.TaskTemplate.ForceUpdate > t.Spec.ForceUpdate {
		return startAsked
	}
	n := attempt(t)
	if n >= maxStartAttempts {
		return startFinal
	}
	if since := now.Sub(t.Status.Timestamp); since >= 0 && since < time.Duration(n)*startRetryBackoff {
		return startBackoff
	}
	return startDue
}

// retrying reports whether a sandbox whose service s lists no own task
// has a retry under way (the cluster may delete the failed iteration's
// task before it lists the next one).
func retrying(s swarm.Service) bool {
	return !stopped(s) && s.Spec.TaskTemplate.ForceUpdate > 0
}

// retryStart starts the next attempt of the sandbox whose own task t
// its node could not start. An update that lost a race (another engine
// retried, or a stop came first) is left: the next read sees the winner.
func (e *Engine) retryStart(ctx context.Context, s swarm.Service, t swarm.Task) {
	spec := s.Spec
	spec.TaskTemplate.ForceUpdate = t.Spec.ForceUpdate + 1
	node := e.nodeName(ctx, t.NodeID)
	if _, err := e.cli.ServiceUpdate(ctx, s.ID, s.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		lvl := slog.LevelWarn
		if strings.Contains(err.Error(), "out of sequence") {
			lvl = slog.LevelDebug // another update came first
		}
		e.log.Log(ctx, lvl, "starting a sandbox's task again failed; the next read tries again", "service", s.Spec.Name, "err", err)
		return
	}
	e.log.Warn("the node could not start a sandbox's task; starting it again", "service", s.Spec.Name, "node", node,
		"state", t.Status.State, "nodeErr", t.Status.Err, "attempt", attempt(t)+1, "of", maxStartAttempts)
}

// fillRetrying reports a sandbox whose start is being retried: running,
// as a task not yet placed is.
func fillRetrying(info *engine.Info, t swarm.Task) {
	info.Status, info.Running = "running", true
	info.StartedAt = t.CreatedAt
}

// startFailedReason is the FailureReason of a task that never ran, what
// the node said prefixed by what.
func startFailedReason(what string, t swarm.Task) string {
	return fmt.Sprintf("%s (%d of %d attempts made): %s; none of its work ran: `aimi swarm resume --retry-failed` starts it again", what, attempt(t), maxStartAttempts, t.Status.Err)
}
