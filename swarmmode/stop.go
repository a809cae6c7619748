package swarmmode

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// stopConstraint is the placement constraint Stop gives a service: no node
// has that label, so the task the stop's job iteration creates is never
// scheduled. Tasks carry their service's spec as it was when they were
// made, so the sandbox's own task is the one without it.
const stopConstraint = "node.labels.org.aimi.stopped==true"

// StopUnreadExit and StopUnreadReason are what a stopped sandbox reports
// when its exit code was never read: the cluster deletes a stopped job's
// task moments after it ends, and an engine that did not see it end in
// that window (Stop ran elsewhere, or the deletion came first) cannot
// learn the code any more. 143 is what a process ended by SIGTERM
// reports; the reason is Info.Error.
const (
	StopUnreadExit   = 143
	StopUnreadReason = "stopped; the cluster removed the task before its exit code was read"
)

const (
	// stopPoll is how often Stop reads the ending task's state: the
	// cluster deletes it a batch interval (250 ms) after it ended, or
	// sooner when a batch was already due.
	stopPoll = 50 * time.Millisecond
	// stopMargin is how much longer than the stop grace Stop watches the
	// task end (the node may be slow to report it).
	stopMargin = 20 * time.Second
	// maxMemos bounds how many sandboxes' last task states an engine keeps.
	maxMemos = 256
)

// memo is what the engine last saw of a sandbox's own task, and the output
// a Stop captured of it.
type memo struct {
	serviceID string
	task      swarm.Task
	used      time.Time
	logs      *capture // nil unless a Stop captured the output
}

// remember keeps t as the last state seen of the sandbox's own task,
// unless a newer one of the same task is kept already.
func (e *Engine) remember(svc, serviceID string, t swarm.Task) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.memoLocked(svc, serviceID, t.ID)
	if t.Meta.Version.Index >= m.task.Meta.Version.Index || m.task.ID == "" {
		m.task = t
	}
	m.used = time.Now()
}

// memoLocked returns the memo of the service's task, replacing one of an
// earlier service or task of the same name.
func (e *Engine) memoLocked(svc, serviceID, taskID string) *memo {
	m := e.memos[svc]
	if m != nil && m.serviceID == serviceID && m.task.ID == taskID {
		return m
	}
	if m != nil && m.logs != nil {
		go m.logs.abort()
	}
	m = &memo{serviceID: serviceID, task: swarm.Task{ID: taskID}, used: time.Now()}
	e.memos[svc] = m
	if len(e.memos) > maxMemos {
		var old string
		for k, v := range e.memos {
			if v.logs != nil && !isDone(v.logs.done) {
				continue // a stop in progress
			}
			if old == "" || v.used.Before(e.memos[old].used) {
				old = k
			}
		}
		if old != "" && old != svc {
			if l := e.memos[old].logs; l != nil {
				go l.abort()
			}
			delete(e.memos, old)
		}
	}
	return m
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// recall returns the memo of the service's sandbox, if any.
func (e *Engine) recall(svc, serviceID string) (memo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.memos[svc]
	if m == nil || m.serviceID != serviceID {
		return memo{}, false
	}
	return *m, true
}

// forget drops what the engine kept of a sandbox (it is being removed).
func (e *Engine) forget(svc string) {
	e.mu.Lock()
	m := e.memos[svc]
	delete(e.memos, svc)
	e.mu.Unlock()
	if m != nil && m.logs != nil {
		m.logs.abort()
	}
}

// claimCapture starts capturing the task's output for a stop, unless a
// capture of it exists already (another Stop of the same sandbox), which
// is returned with mine false.
func (e *Engine) claimCapture(ctx context.Context, svc, serviceID string, t swarm.Task) (c *capture, mine bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.memoLocked(svc, serviceID, t.ID)
	if t.Meta.Version.Index >= m.task.Meta.Version.Index {
		m.task = t
	}
	m.used = time.Now()
	if m.logs != nil {
		return m.logs, false
	}
	m.logs = e.startCapture(ctx, t.ID)
	return m.logs, true
}

// dropCapture forgets a capture whose stop failed: the task runs on.
func (e *Engine) dropCapture(svc string, c *capture) {
	e.mu.Lock()
	if m := e.memos[svc]; m != nil && m.logs == c {
		m.logs = nil
	}
	e.mu.Unlock()
	c.abort()
}

// ended reports whether a task state is terminal.
func ended(t swarm.Task) bool {
	switch t.Status.State {
	case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateFailed, swarm.TaskStateRejected,
		swarm.TaskStateRemove, swarm.TaskStateOrphaned:
		return true
	}
	return false
}

// stopped reports whether Stop has updated the service.
func stopped(s swarm.Service) bool { return hasStopConstraint(s.Spec.TaskTemplate.Placement) }

// Stop shuts the sandbox's task down (SIGTERM, then SIGKILL after the stop
// grace fixed at creation) and returns once it has ended, or the grace and
// a margin have passed. The service is updated with a constraint no node
// meets and a forced update: a job's update starts a new iteration, which
// ends the running task and makes one that is never scheduled. The cluster
// then deletes the ended task and its container within moments, so Stop
// reads the task's state every stopPoll until it ends (keeping its exit
// code for Inspect and Wait) and follows its log from before the update
// until it ended (keeping its output for Lines). Stopping a sandbox that
// is not running is not an error; grace is ignored.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	sb, err := e.serviceOf(ctx, id)
	if err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	svc := sb.svc
	s, err := e.inspectService(ctx, sb)
	if errdefs.IsNotFound(err) {
		if err := e.markStopped(ctx, sb); err != nil {
			return err
		}
		// A delivery that raced the mark made the service meanwhile: it
		// is stopped as any running sandbox is.
		if s, err = e.inspectService(ctx, sb); errdefs.IsNotFound(err) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", svc, err)
	}
	if stopped(s) {
		if m, ok := e.recall(svc, s.ID); ok && m.logs != nil {
			select { // a stop in progress: done when it is
			case <-m.logs.done:
			case <-ctx.Done():
			}
		}
		return nil
	}
	tasks, err := e.tasksOf(ctx, s.ID)
	if err != nil {
		return fmt.Errorf("stop %s: %w", svc, err)
	}
	own, ok := ownTask(tasks)
	if ok && ended(own) {
		e.remember(svc, s.ID, own)
		if startRetry(s, own, time.Now()) == startFinal {
			// It ended by itself; an update now would only have the
			// cluster delete it, with its output.
			return nil
		}
		// Its node could not start it and another attempt is due or
		// coming: the stop's update keeps it from being started.
		return e.updateStopped(ctx, sb)
	}
	var c *capture
	if ok {
		var mine bool
		c, mine = e.claimCapture(ctx, svc, s.ID, own)
		if !mine {
			select {
			case <-c.done:
			case <-ctx.Done():
			}
			return nil
		}
		c.waitFirst(ctx)
	}
	if err := e.updateStopped(ctx, sb); err != nil {
		if c != nil {
			e.dropCapture(svc, c)
		}
		return err
	}
	if c == nil {
		return nil // no task yet: none will be placed
	}
	updated := time.Now()
	e.watchStop(ctx, svc, s.ID, own.ID)
	endedAt := time.Now()
	c.finish(ctx)
	m, _ := e.recall(svc, s.ID)
	e.log.Debug("stopped", "service", svc, "task", own.ID, "state", m.task.Status.State, "ended after", endedAt.Sub(updated), "output read for", time.Since(endedAt))
	return nil
}

// updateStopped adds the stop constraint and forces an update; a service
// someone else stopped meanwhile is left as it is.
func (e *Engine) updateStopped(ctx context.Context, sb sandbox) error {
	svc := sb.svc
	for attempt := 0; ; attempt++ {
		s, err := e.inspectService(ctx, sb)
		if err != nil {
			return fmt.Errorf("stop %s: %w", svc, err)
		}
		if stopped(s) {
			return nil
		}
		spec := s.Spec
		if spec.TaskTemplate.Placement == nil {
			spec.TaskTemplate.Placement = &swarm.Placement{}
		}
		spec.TaskTemplate.Placement.Constraints = append(spec.TaskTemplate.Placement.Constraints, stopConstraint)
		// A changed placement alone did not always end a job's running
		// task (seen still up two minutes after the update); a forced
		// update starts a new iteration, which does.
		spec.TaskTemplate.ForceUpdate++
		_, err = e.cli.ServiceUpdate(ctx, s.ID, s.Version, spec, swarm.ServiceUpdateOptions{})
		if err == nil {
			return nil
		}
		// "update out of sequence": someone else updated it meanwhile.
		if attempt >= 5 {
			return fmt.Errorf("stop %s: update the service: %w", svc, err)
		}
	}
}

// watchStop reads the ending task's state until it is terminal or gone,
// remembering each state read.
func (e *Engine) watchStop(ctx context.Context, svc, serviceID, taskID string) {
	deadline := time.Now().Add(e.opts.StopGrace + stopMargin)
	for {
		t, _, err := e.cli.TaskInspectWithRaw(ctx, taskID)
		switch {
		case errdefs.IsNotFound(err):
			return
		case err == nil:
			e.remember(svc, serviceID, t)
			if ended(t) {
				return
			}
		}
		if time.Now().After(deadline) {
			e.log.Warn("a stopped sandbox's task has not ended in its stop grace; Wait reads on", "service", svc, "task", taskID, "err", err)
			return
		}
		if ctxutil.Sleep(ctx, stopPoll) != nil {
			return
		}
	}
}

// StoppedBeforeDelivery is Info.Error of a sandbox stopped before its
// task-request was delivered: it never ran (exit code 0).
const StoppedBeforeDelivery = "stopped before it started; it never ran"

// markStopped records that a sandbox without a service was stopped, as a
// config of its own: Inspect then says it exited (so Wait returns), and
// WriteStdin refuses to start it.
func (e *Engine) markStopped(ctx context.Context, sb sandbox) error {
	_, cfg, err := e.spec(ctx, sb)
	if err != nil {
		return fmt.Errorf("stop %s: %w", sb.svc, err)
	}
	labels := map[string]string{}
	for k, v := range cfg.Spec.Labels {
		labels[k] = v
	}
	labels[contract.LabelSwarmObject] = objStopped
	_, err = e.cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: objName(sb.svc, objStopped), Labels: labels}, Data: []byte("stopped\n")})
	if err != nil && !errdefs.IsConflict(err) {
		return fmt.Errorf("stop %s: mark it stopped: %w", sb.svc, err)
	}
	return nil
}

// stoppedBeforeDelivery reports whether markStopped marked the sandbox.
func (e *Engine) stoppedBeforeDelivery(ctx context.Context, sb sandbox) (bool, error) {
	cfg, _, err := e.cli.ConfigInspectWithRaw(ctx, objName(sb.svc, objStopped))
	switch {
	case errdefs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inspect %s: %w", sb.svc, err)
	}
	return sb.own.owns(cfg.Spec.Labels), nil
}
