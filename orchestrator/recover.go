package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// selector is the label filter of everything this Manager owns.
func (m *Manager) selector(extra map[string]string) map[string]string {
	sel := map[string]string{contract.LabelSandbox: "true"}
	maps.Copy(sel, m.cfg.Labels)
	maps.Copy(sel, extra)
	return sel
}

// Recover is the daemon's start: it finds its containers by label, and for
// every repository they belong to adopts the swarm of its state file,
// reconciling each entry per docs/design.md's table (re-attach running ones and
// read on from the journal's cursor, take exits that happened meanwhile,
// mark zombies). A repository that cannot be adopted is logged and skipped;
// only an engine failure is an error.
func (m *Manager) Recover(ctx context.Context) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	infos, err := m.eng.List(ctx, m.selector(nil))
	if err != nil {
		return fmt.Errorf("recover: list the sandbox containers: %w", err)
	}
	repos := map[string]bool{}
	for _, in := range infos {
		// A label no request could have made (edited, or another tool's)
		// names no repository of this daemon.
		if p := in.Labels[contract.LabelProject]; api.CheckRepoPath(p) == nil {
			repos[p] = true
		}
	}
	for _, repo := range slices.Sorted(maps.Keys(repos)) {
		unlock := m.lockRepo(repo)
		sw, err := m.adopt(ctx, repo)
		unlock()
		switch {
		case errors.Is(err, api.ErrNoSwarm):
			m.log.Info("recover: no swarm to adopt for these containers", "repo", repo)
		case err != nil:
			m.log.Warn("recover: could not adopt the swarm", "repo", repo, "err", err)
		default:
			m.log.Info("recover: swarm adopted", "repo", repo, "swarm", sw.id, "containers", len(sw.list()))
		}
	}
	return nil
}

// reconcile classifies one non-terminal container by what the engine says.
func classify(info engine.Info, found bool) (supMode, *exitFacts) {
	switch {
	case !found:
		return 0, &exitFacts{missing: true}
	case info.Status == "paused" || info.Status == "removing":
		// Before Running: the engine reports a paused container as running.
		return 0, &exitFacts{stopped: true}
	case info.Running:
		return modeAttach, nil
	case info.Status == "created":
		return modeFresh, nil
	default: // exited, dead
		return modeFinish, nil
	}
}

// published asks the publisher whether c's branch reached the checkout;
// when it cannot tell, or there is no publisher, it says yes: publishing is
// left to the user rather than retried blindly at every start.
func (sw *swarm) published(ctx context.Context, c *ctr) bool {
	if sw.m.cfg.Publisher == nil || sw.isAttempt(c.name) {
		return true // an attempt is published when picked (recoverPicks)
	}
	ok, err := sw.m.cfg.Publisher.Published(ctx, sw.branchOf(c))
	if err != nil {
		sw.m.log.Warn("recover: cannot tell whether a finished container's branch was published", "container", c.name, "err", err)
		return true
	}
	return ok
}

// rebuildState makes a state for a repository whose state file is gone
// but whose containers are still on the engine (docs/design.md decision 6:
// labels are the recovery index). The newest swarm wins: one with a running
// container, else the one that started last. Each entry starts pending;
// its journal (or, without one, the container's whole output) decides the
// rest. api.ErrNoSwarm when the engine has nothing for the repo.
func (m *Manager) rebuildState(ctx context.Context, repo string) (*state.Swarm, error) {
	infos, err := m.eng.List(ctx, m.selector(map[string]string{contract.LabelProject: repo}))
	if err != nil {
		return nil, fmt.Errorf("list the repository's containers: %w", err)
	}
	type cand struct {
		running bool
		latest  time.Time
	}
	cands := map[string]*cand{}
	for _, in := range infos {
		id := in.Labels[contract.LabelSwarmID]
		if id == "" || in.Labels[contract.LabelTaskFile] == "" {
			continue
		}
		c := cands[id]
		if c == nil {
			c = &cand{}
			cands[id] = c
		}
		c.running = c.running || in.Running
		if in.StartedAt.After(c.latest) {
			c.latest = in.StartedAt
		}
	}
	best := ""
	for id, c := range cands {
		if b := cands[best]; best == "" || c.running && !b.running || c.running == b.running && c.latest.After(b.latest) {
			best = id
		}
	}
	if best == "" {
		return nil, api.ErrNoSwarm
	}
	now := time.Now().UTC()
	sw := &state.Swarm{SwarmID: best, CreatedAt: now, UpdatedAt: now}
	for _, in := range infos {
		if in.Labels[contract.LabelSwarmID] != best || in.Labels[contract.LabelTaskFile] == "" {
			continue
		}
		branch := in.Labels[contract.LabelBranch]
		if branch == "" {
			if tf, err := tasks.LoadIn(repo, in.Labels[contract.LabelTaskFile]); err == nil {
				branch = tf.Metadata.BranchName
			}
		}
		sw.Containers = append(sw.Containers, &state.Container{ContainerID: in.ID, ContainerName: in.Name,
			TaskFilePath: in.Labels[contract.LabelTaskFile], BranchName: branch, Status: state.StatusPending, CreatedAt: now, UpdatedAt: now})
	}
	slices.SortFunc(sw.Containers, func(a, b *state.Container) int { return strings.Compare(a.ContainerName, b.ContainerName) })
	m.log.Warn("swarm state file missing; rebuilt from the containers' labels and journals", "repo", repo, "swarm", best, "containers", len(sw.Containers))
	return sw, nil
}

func rank(mode supMode, facts *exitFacts) int {
	switch {
	case facts != nil:
		return 0
	case mode == modeAttach:
		return 1
	case mode == modeFinish:
		return 2
	default:
		return 3
	}
}

// restoreDetail rebuilds the view's extras (errors, last output, rejected
// lines) from a journal record.
func (sw *swarm) restoreDetail(c *ctr, r state.Record) {
	switch {
	case r.Stream == state.StreamStderr && (r.Reason == "" || r.Reason == stderrReason):
		return // the runner's log, as live (handle)
	case r.Omitted != nil:
		return // the journal's cap: not a line of the container
	case r.Usage != nil:
		return // a model call's account: not a line of the container
	case r.Stream == state.StreamDaemon && r.Type == state.TypeEgressDenied:
		c.egressDenied++
		return
	case r.Stream == state.StreamDaemon && r.Type == state.TypeGitRefused:
		c.gitRefused++
		return
	case r.Stream == state.StreamDaemon && !r.Valid && r.Rejected == "":
		return // a note of the daemon's (a limit wait, the inbox): not a line of the container
	case !r.Valid || r.Rejected != "":
		c.rejected++
		return
	}
	if msg, err := r.DecodeMessage(); err == nil && msg != nil {
		sw.noteMessageLocked(c, lineResult{msg: msg})
	}
}

// reconcileLive re-checks every non-terminal container nobody supervises
// (Status, Resume and Cleanup call it) and hands it to the right mode.
func (sw *swarm) reconcileLive(ctx context.Context) {
	for _, c := range sw.list() {
		if sw.terminal(c.name) || sw.supervised(c) {
			continue
		}
		info, err := sw.m.eng.Inspect(ctx, sw.idOf(c))
		found := err == nil
		if err != nil && ctx.Err() != nil {
			return
		}
		mode, facts := classify(info, found)
		if facts != nil {
			sw.finish(sw.m.life, c, *facts)
			continue
		}
		if mode == modeFresh && sw.led.status(c.name) == state.StatusPending {
			// Pending without a supervisor: Resume starts it; Status and
			// Cleanup leave it waiting.
			continue
		}
		sw.launch(c, mode)
	}
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
