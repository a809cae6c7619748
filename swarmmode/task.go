package swarmmode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/enginelog"
	"github.com/aimi-tools/swarm/internal/logcursor"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// Inspect reports a sandbox's state: "created" until its service has a
// task, "running" while the task is not terminal, "exited" once it is (or
// "dead" when its node was lost), with the exit code and, when the engine
// ended it, a Failure code.
func (e *Engine) Inspect(ctx context.Context, id string) (engine.Info, error) {
	sb, err := e.serviceOf(ctx, id)
	if err != nil {
		return engine.Info{}, err
	}
	svc := sb.svc
	s, err := e.inspectService(ctx, sb)
	if errdefs.IsNotFound(err) {
		st, cfg, err := e.spec(ctx, sb)
		if err != nil {
			return engine.Info{}, err
		}
		info := engine.Info{ID: SandboxID(svc), Name: st.Name, Image: st.Image, Labels: cfg.Spec.Labels, Status: "created",
			NanoCPUs: st.NanoCPUs, MemoryBytes: st.MemoryBytes, PidsLimit: st.PidsLimit, ReadOnlyRootfs: st.ReadOnlyRootfs}
		stopped, err := e.stoppedBeforeDelivery(ctx, sb)
		if err != nil {
			return engine.Info{}, err
		}
		if stopped {
			info.Status, info.Error = "exited", StoppedBeforeDelivery
		}
		return info, nil
	}
	if err != nil {
		return engine.Info{}, fmt.Errorf("inspect service %s: %w", svc, err)
	}
	info := engine.Info{ID: SandboxID(svc), Name: s.Spec.Labels[contract.LabelContainer], Labels: s.Spec.Labels, Status: "created"}
	if info.Name == "" {
		info.Name = svc
	}
	if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
		info.Image, info.ReadOnlyRootfs, info.User = cs.Image, cs.ReadOnly, cs.User
		for _, kv := range cs.Env {
			if u, ok := strings.CutPrefix(kv, contract.EnvRunAs+"="); ok {
				info.User = u // started as root only to read its secrets
			}
		}
		info.CapAdd, info.CapDrop = cs.CapabilityAdd, cs.CapabilityDrop
		info.Labels = cs.Labels
	}
	if r := s.Spec.TaskTemplate.Resources; r != nil && r.Limits != nil {
		info.NanoCPUs, info.MemoryBytes, info.PidsLimit = r.Limits.NanoCPUs, r.Limits.MemoryBytes, r.Limits.Pids
	}
	tasks, err := e.tasksOf(ctx, s.ID)
	if err != nil {
		return info, err
	}
	if t, ok := ownTask(tasks); ok {
		e.remember(svc, s.ID, t)
		switch startRetry(s, t, time.Now()) {
		case startDue:
			e.retryStart(ctx, s, t)
			fillRetrying(&info, t)
		case startAsked, startBackoff:
			fillRetrying(&info, t)
		default:
			e.fillTask(ctx, &info, t)
		}
		return info, nil
	}
	switch {
	case stopped(s):
		e.fillStopped(ctx, &info, svc, s)
	case retrying(s):
		if m, ok := e.recall(svc, s.ID); ok && ended(m.task) && startRetry(s, m.task, time.Now()) == startFinal {
			// The last attempt's task, deleted since this engine saw it.
			e.fillTask(ctx, &info, m.task)
			break
		}
		info.Status, info.Running = "running", true
	}
	return info, nil
}

// fillStopped fills in a stopped sandbox whose own task the cluster has
// deleted: the last state this engine saw of it if that was its end, else
// StopUnreadExit with StopUnreadReason.
func (e *Engine) fillStopped(ctx context.Context, info *engine.Info, svc string, s swarm.Service) {
	m, ok := e.recall(svc, s.ID)
	if ok && ended(m.task) {
		e.fillTask(ctx, info, m.task)
		return
	}
	if ok && m.task.NodeID != "" {
		info.StartedAt, info.Node = m.task.CreatedAt, e.nodeName(ctx, m.task.NodeID)
	}
	info.Status, info.Running = "exited", false
	info.ExitCode, info.Error = StopUnreadExit, StopUnreadReason
	info.FinishedAt = s.UpdatedAt
}

// tasksOf lists a service's tasks.
func (e *Engine) tasksOf(ctx context.Context, serviceID string) ([]swarm.Task, error) {
	tasks, err := e.cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", serviceID))})
	if err != nil {
		return nil, fmt.Errorf("list tasks of service %s: %w", serviceID, err)
	}
	return tasks, nil
}

// ownTask is the sandbox's own task: the newest of those its service's
// creation and its start retries (retry.go) made, each a job iteration of
// its own. A stopped job has one more, made by the stop's iteration with
// the stop constraint and never scheduled; the cluster deletes the own
// task soon after it ended, after which there is none.
func ownTask(tasks []swarm.Task) (swarm.Task, bool) {
	var own []swarm.Task
	for _, t := range tasks {
		if !hasStopConstraint(t.Spec.Placement) {
			own = append(own, t)
		}
	}
	if len(own) == 0 {
		return swarm.Task{}, false
	}
	iter := func(t swarm.Task) uint64 {
		if t.JobIteration == nil {
			return 0
		}
		return t.JobIteration.Index
	}
	sort.Slice(own, func(i, j int) bool {
		if a, b := iter(own[i]), iter(own[j]); a != b {
			return a < b
		}
		return own[i].CreatedAt.Before(own[j].CreatedAt)
	})
	return own[len(own)-1], true
}

func hasStopConstraint(p *swarm.Placement) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Constraints {
		if c == stopConstraint {
			return true
		}
	}
	return false
}

// startFailedErr begins a failed task's error when the node made its
// container but could not start it (Docker's Swarm executor's words).
const startFailedErr = "starting container failed"

// neverRan says whether a failed task's program never ran: no container,
// or one whose start failed (the engine then reports exit code 128, which
// is not the runner's: a node shutting down while the task starts fails
// it so, and its user must see a start failure to retry, not a crash).
func neverRan(t swarm.Task) bool {
	cs := t.Status.ContainerStatus
	return cs == nil || cs.ContainerID == "" || strings.HasPrefix(t.Status.Err, startFailedErr)
}

// fillTask maps a task's state onto Info.
func (e *Engine) fillTask(ctx context.Context, info *engine.Info, t swarm.Task) {
	info.StartedAt = t.CreatedAt
	info.Node = e.nodeName(ctx, t.NodeID)
	if cs := t.Status.ContainerStatus; cs != nil {
		info.Pid = cs.PID
		info.ExitCode = cs.ExitCode
	}
	info.Error = t.Status.Err
	for _, na := range t.NetworksAttachments {
		if len(na.Addresses) == 0 || na.Network.Spec.Name == "ingress" {
			continue
		}
		if info.Networks == nil {
			info.Networks = map[string]string{}
		}
		addr, _, _ := strings.Cut(na.Addresses[0], "/")
		info.Networks[na.Network.Spec.Name] = addr
	}
	switch t.Status.State {
	case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateRemove:
		info.Status = "exited"
		info.FinishedAt = t.Status.Timestamp
	case swarm.TaskStateFailed:
		info.Status = "exited"
		info.FinishedAt = t.Status.Timestamp
		if neverRan(t) {
			// It never ran: the node could not start it.
			info.Failure, info.FailureReason = engine.CodeStartFailed, startFailedReason("the node could not start the task", t)
		}
	case swarm.TaskStateRejected:
		info.Status = "exited"
		info.FinishedAt = t.Status.Timestamp
		info.Failure, info.FailureReason = engine.CodeStartFailed, startFailedReason("the node rejected the task", t)
	case swarm.TaskStateOrphaned:
		info.Status = "dead"
		info.FinishedAt = t.Status.Timestamp
		info.Failure, info.FailureReason = CodeNodeLost, "the task was orphaned: its node has been unreachable too long"
	default:
		info.Status, info.Running = "running", true
		if t.NodeID == "" {
			return
		}
		if down, why := e.nodeDown(ctx, t.NodeID); down {
			info.Status, info.Running = "dead", false
			info.FinishedAt = time.Now().UTC()
			info.Failure, info.FailureReason = CodeNodeLost, fmt.Sprintf("node %s running the task is %s", info.Node, why)
		}
	}
}

// nodeDown reports whether a node is down or gone from the cluster.
func (e *Engine) nodeDown(ctx context.Context, nodeID string) (bool, string) {
	n, _, err := e.cli.NodeInspectWithRaw(ctx, nodeID)
	if errdefs.IsNotFound(err) {
		return true, "gone from the swarm"
	}
	if err != nil {
		return false, ""
	}
	switch n.Status.State {
	case swarm.NodeStateDown, swarm.NodeStateDisconnected:
		return true, string(n.Status.State)
	}
	return false, ""
}

func (e *Engine) nodeName(ctx context.Context, nodeID string) string {
	if nodeID == "" {
		return ""
	}
	e.mu.Lock()
	name, ok := e.nodes[nodeID]
	e.mu.Unlock()
	if ok {
		return name
	}
	n, _, err := e.cli.NodeInspectWithRaw(ctx, nodeID)
	if err != nil {
		return nodeID
	}
	name = n.Description.Hostname
	e.mu.Lock()
	e.nodes[nodeID] = name
	e.mu.Unlock()
	return name
}

// Wait reports the sandbox's exit on the returned channel (one value, then
// closed), polling its task's state. It may be called before the service
// exists; a sandbox that disappears is container.ErrNotFound.
func (e *Engine) Wait(ctx context.Context, id string) <-chan engine.Exit {
	out := make(chan engine.Exit, 1)
	go func() {
		defer close(out)
		failures := 0
		for {
			info, err := e.Inspect(ctx, id)
			switch {
			case ctx.Err() != nil:
				out <- engine.Exit{Err: fmt.Errorf("wait for %s: %w", id, ctx.Err())}
				return
			case errors.Is(err, engine.ErrNotFound):
				out <- engine.Exit{Err: fmt.Errorf("wait for %s: %w (removed while waiting)", id, engine.ErrNotFound)}
				return
			case err != nil:
				failures++
				e.log.Warn("reading a task's state failed; retrying", "sandbox", id, "err", err, "failures", failures)
			case info.Status == "exited" || info.Status == "dead":
				out <- engine.Exit{Code: info.ExitCode, Failure: info.Failure, FailureReason: info.FailureReason}
				return
			default:
				failures = 0
			}
			if ctxutil.Sleep(ctx, e.opts.Poll) != nil {
				out <- engine.Exit{Err: fmt.Errorf("wait for %s: %w", id, ctx.Err())}
				return
			}
		}
	}()
	return out
}

// Lines yields the sandbox's output lines strictly after the position,
// from snapshots of its task's logs (timestamps on).
func (e *Engine) Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan engine.Line, error) {
	sb, err := e.serviceOf(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read output of %s: %w", id, err)
	}
	svc := sb.svc
	if _, err := e.Inspect(ctx, SandboxID(svc)); err != nil {
		return nil, fmt.Errorf("read output of %s: %w", svc, err)
	}
	src := enginelog.Source{
		Open: func(ctx context.Context, since time.Time, tail int) (io.ReadCloser, error) {
			s, err := e.inspectService(ctx, sb)
			if errdefs.IsNotFound(err) {
				return io.NopCloser(&bytes.Buffer{}), nil // not delivered yet
			}
			if err != nil {
				return nil, fmt.Errorf("open logs: %w", err)
			}
			tasks, err := e.tasksOf(ctx, s.ID)
			if err != nil {
				return nil, err
			}
			t, ok := ownTask(tasks)
			m, _ := e.recall(svc, s.ID)
			if m.logs != nil && (!ok || t.ID == m.task.ID && ended(t)) {
				// A stop captured the output: once the task ended, the
				// cluster may delete it and its container any moment.
				select {
				case <-m.logs.done:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if !ok || m.logs.complete() {
					return m.logs.open(ctx, since, tail)
				}
			}
			if !ok || t.NodeID == "" {
				return io.NopCloser(&bytes.Buffer{}), nil
			}
			if down, _ := e.nodeDown(ctx, t.NodeID); down {
				// The node holds the only copy of the task's log; asking
				// for it would wait for a node that is gone.
				return io.NopCloser(&bytes.Buffer{}), nil
			}
			opts := containertypes.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: "all"}
			if tail >= 0 {
				opts.Tail = strconv.Itoa(tail)
			}
			if !since.IsZero() {
				opts.Since = enginelog.SinceParam(since)
			}
			rc, err := e.cli.TaskLogs(ctx, t.ID, opts)
			if errdefs.IsNotFound(err) {
				// Deleted since it was listed: a stopped task.
				if m.logs != nil && m.task.ID == t.ID {
					return m.logs.open(ctx, since, tail)
				}
				return io.NopCloser(&bytes.Buffer{}), nil
			}
			if err != nil {
				return nil, fmt.Errorf("open logs of task %s: %w", t.ID, err)
			}
			return rc, nil
		},
		Inspect: func(ctx context.Context) (engine.Info, error) { return e.Inspect(ctx, SandboxID(svc)) },
	}
	return enginelog.Read(ctx, svc, after, follow, src, e.log), nil
}

// CodeNodeLost is the failure code (engine.Exit.Failure) of a sandbox whose
// cluster node went down or left the cluster; the task may be run again
// elsewhere (resume --retry-failed).
const CodeNodeLost = "NODE_LOST"
