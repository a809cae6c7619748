package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// nameTaken reports whether a container name is used by a container the
// swarm must not replace: one of another repository, or a running one.
// Create removes any other holder of the name (an exited container of the
// repository); stale is that holder when it is this daemon's, so that its
// work is taken before it goes (takeStale).
func (sw *swarm) nameTaken(ctx context.Context, name string, mine map[string]bool) (taken bool, stale *holder) {
	if mine[name] {
		return true, nil
	}
	info, err := sw.m.eng.Inspect(ctx, name)
	if err != nil {
		return false, nil
	}
	if info.Labels[contract.LabelProject] != sw.repo || info.Running {
		return true, nil
	}
	if !sw.sameRepository(info.Labels) {
		return true, nil // another repository that was at this path
	}
	for k, v := range sw.m.selector(nil) {
		if info.Labels[k] != v {
			return false, nil
		}
	}
	h := holderOf(info)
	return false, &h
}

// freeName is a name for c that no container holds: during the creates a
// stale holder counts as taken, since its work was not looked at.
func (sw *swarm) freeName(ctx context.Context, c *ctr, mine map[string]bool) string {
	return uniqueName(baseName(c.taskFile, c.attempt), func(n string) bool {
		taken, stale := sw.nameTaken(ctx, n, mine)
		return taken || stale != nil
	})
}

// takeStale takes the work of the exited containers a start will replace
// (their names are free for it) before anything is replaced; the first
// that cannot be taken refuses the start.
func (sw *swarm) takeStale(ctx context.Context, stale []holder) error {
	for _, h := range stale {
		if err := sw.m.takeWork(ctx, sw.repo, sw.m.withReport(sw.repo, h), true); err != nil {
			return err
		}
	}
	return nil
}

// createConcurrency bounds parallel create calls: the engine serialises
// parts of create anyway, and a few in flight hide the round trips.
const createConcurrency = 8

// createAll creates the containers planNames named, in parallel, and
// starts each as soon as it exists: its supervisor is launched before the
// creates begin, so run slots are queued in task-file order, and waits
// until its container is created and its entry (pending, with the real id)
// is in the saved state file. Entries are tracked in task-file order; the
// ones whose creates finished together share one save. It returns when
// every container is created and tracked.
//
// On error it returns what it created, for discard: the supervisors it
// launched are stopped first, without deciding anything, so the caller's
// removal is the last word on every container, started or not.
func (sw *swarm) createAll(ctx context.Context, all []*ctr) (_ []*ctr, err error) {
	// The supervisors of this start live in sctx: a failed start ends
	// them; otherwise it ends with the Manager, or once they are all done.
	sctx, abort := context.WithCancel(sw.m.life)
	var dones []chan struct{}
	defer func() {
		if err != nil {
			abort()
			for _, d := range dones {
				<-d
			}
			return
		}
		go func() {
			for _, d := range dones {
				<-d
			}
			abort()
		}()
	}()
	for _, c := range all {
		c.created = make(chan struct{})
		if d := sw.launchIn(sctx, c, modeFresh); d != nil {
			dones = append(dones, d)
		}
	}

	// Names are checked, then created: another repository's swarm may take
	// one in between. The engine refuses the second of a name, and the
	// container that lost it takes the next free one.
	mine := map[string]bool{}
	for _, c := range sw.list() {
		mine[c.name] = true
	}
	for _, c := range all {
		mine[c.name] = true
	}
	var mineMu sync.Mutex // guards mine while creates run
	rename := func(ctx context.Context, c *ctr) string {
		mineMu.Lock()
		defer mineMu.Unlock()
		name := sw.freeName(ctx, c, mine)
		mine[name] = true
		return name
	}
	cctx, cancelCreates := context.WithCancel(ctx)
	defer cancelCreates()
	g, gctx := errgroup.WithContext(cctx)
	g.SetLimit(createConcurrency)
	made := make([]chan error, len(all))
	for i := range made {
		made[i] = make(chan error, 1)
	}
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		for i, c := range all {
			g.Go(func() error {
				err := sw.create(gctx, c, rename)
				made[i] <- err
				return err
			})
		}
	}()
	err = sw.trackInOrder(ctx, all, made)
	if err != nil {
		cancelCreates()
	}
	<-queued
	if werr := g.Wait(); err == nil {
		err = werr
	}
	var created []*ctr
	for _, c := range all {
		if sw.idOf(c) != "" {
			created = append(created, c)
		}
	}
	return created, err
}

// nameAndTake names the containers of planned (planNames) and takes the
// work of the exited containers whose names they reuse (takeStale). When
// there were any, the task files (files, as validateTasks read them into
// planned) are read again: taking the work may have moved the branches
// they are read from, and each container's fold must start from what it
// will read.
func (sw *swarm) nameAndTake(ctx context.Context, planned []plannedTask, files []string, existing map[string]string) ([]*ctr, error) {
	planned = sw.expandAttempts(planned)
	named, stale := sw.planNames(ctx, planned)
	sw.registerGroups(named)
	if err := sw.takeStale(ctx, stale); err != nil || len(stale) == 0 {
		return named, err
	}
	again, err := validateTasks(ctx, sw.repo, files, existing, sw.local)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*tasks.File{}
	for _, p := range again {
		byPath[p.path] = p.tf
	}
	for _, c := range named {
		c.tf = byPath[c.taskFile]
		c.branch = attemptBranch(c.tf.Metadata.BranchName, c.attempt)
	}
	return named, nil
}

// planNames gives each planned task file its container, named in task-file
// order, and returns the exited containers whose names it reuses: their
// work is taken (takeStale) before Create replaces them.
func (sw *swarm) planNames(ctx context.Context, planned []plannedTask) (all []*ctr, stale []holder) {
	mine := map[string]bool{}
	for _, c := range sw.list() {
		mine[c.name] = true
	}
	// The engine is asked about every first-choice name at once: one
	// round trip per task file in sequence was a visible part of a large
	// start. Names are then assigned in task-file order from the answers;
	// only a clash asks again, for the alternatives.
	first := make([]bool, len(planned))
	firstStale := make([]*holder, len(planned))
	var probe errgroup.Group
	probe.SetLimit(createConcurrency)
	for i, p := range planned {
		probe.Go(func() error {
			first[i], firstStale[i] = sw.nameTaken(ctx, baseName(p.path, p.attempt), nil)
			return nil
		})
	}
	_ = probe.Wait()
	all = make([]*ctr, len(planned))
	for i, p := range planned {
		base := baseName(p.path, p.attempt)
		var holds *holder // the stale holder of the name last found free
		name := uniqueName(base, func(n string) bool {
			if n == base && !mine[n] {
				holds = firstStale[i]
				return first[i]
			}
			taken, st := sw.nameTaken(ctx, n, mine)
			holds = st
			return taken
		})
		if holds != nil {
			stale = append(stale, *holds)
		}
		mine[name] = true
		all[i] = &ctr{name: name, taskFile: p.path, branch: attemptBranch(p.tf.Metadata.BranchName, p.attempt), tf: p.tf, repoURL: sw.repoURL,
			stopCh: make(chan struct{}), attempt: p.attempt, variant: p.variant}
	}
	return all, stale
}

// trackInOrder takes each create's result in task-file order, tracks the
// created container as pending with its real id, saves the state file
// when no further result is waiting, and then lets the containers tracked
// so far start. It stops at the first failure.
func (sw *swarm) trackInOrder(ctx context.Context, all []*ctr, made []chan error) error {
	var unsaved []*ctr
	for i, c := range all {
		if err := <-made[i]; err != nil {
			return err
		}
		sw.mu.Lock()
		sw.ctrs = append(sw.ctrs, c)
		sw.mu.Unlock()
		now := time.Now().UTC()
		sc := &state.Container{ContainerID: sw.idOf(c), ContainerName: c.name, TaskFilePath: c.taskFile,
			BranchName: c.branch, Status: state.StatusPending, CreatedAt: now, UpdatedAt: now}
		if err := sw.led.track(sc, state.NewTracker(c.tf)); err != nil {
			return fmt.Errorf("record container %s: %w", c.name, err)
		}
		sw.m.publish(api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: c.name, Kind: api.EventContainerCreated, Status: string(state.StatusPending)})
		unsaved = append(unsaved, c)
		if i+1 < len(all) && len(made[i+1]) > 0 {
			continue // the next one is ready too: one save for both
		}
		// No container starts before its entry, with its real id, is
		// in the state file.
		if err := sw.led.flush(ctx); err != nil {
			return fmt.Errorf("save the swarm state: %w", err)
		}
		sw.confirmWarm(unsaved)
		for _, u := range unsaved {
			close(u.created)
		}
		unsaved = unsaved[:0]
	}
	return nil
}

// awaitCreated waits until createAll has created and saved c (at once for
// a container that existed before); false when ctx ended first.
func (sw *swarm) awaitCreated(ctx context.Context, c *ctr) bool {
	if c.created == nil {
		return true
	}
	select {
	case <-c.created:
		return true
	case <-ctx.Done():
		return false
	}
}

// maxRenames bounds how often one container of a start looks for another
// name after the engine refused one.
const maxRenames = 8

// create makes c's container (granting git access first in local mode).
// When the engine refuses the name and rename is set (a new container, not
// a rerun), c takes the name rename gives and tries again.
func (sw *swarm) create(ctx context.Context, c *ctr, rename func(context.Context, *ctr) string) error {
	for attempt := 1; ; attempt++ {
		err := sw.createAs(ctx, c)
		if err == nil || rename == nil || !errors.Is(err, engine.ErrConflict) || attempt > maxRenames {
			return err
		}
		old := c.name
		name := rename(ctx, c)
		sw.mu.Lock()
		c.name = name
		sw.mu.Unlock()
		sw.m.log.Info("container name taken meanwhile; using another", "swarm", sw.id, "taken", old, "name", name, "err", err)
	}
}

// createAs makes c's container under c.name.
func (sw *swarm) createAs(ctx context.Context, c *ctr) error {
	var g *Grant
	if (sw.local || sw.m.cfg.Models != nil) && sw.gatewayIP() == "" {
		// Adopted after a restart with nothing running: the network
		// and the services' listeners come back first.
		if err := sw.ensureNetwork(ctx); err != nil {
			return err
		}
	}
	if sw.local {
		gr, err := sw.m.cfg.Git.Grant(ctx, sw.branchOf(c), sw.gatewayIP())
		if err != nil {
			return fmt.Errorf("grant git access to %s: %w", c.name, err)
		}
		g = &gr
		c.repoURL, c.branchExists = gr.RepoURL, gr.BranchExists
	}
	var mg *ModelGrant
	if sw.m.cfg.Models != nil {
		gr, err := sw.m.cfg.Models.Grant(sw.sandbox(c), sw.modelGateway())
		if err != nil {
			sw.revoke(c)
			return fmt.Errorf("grant model access to %s: %w", c.name, err)
		}
		mg = &gr
	}
	spec := sw.createSpec(c, g, mg)
	if ok, err := sw.claimWarm(ctx, c, spec); ok || err != nil {
		if err != nil {
			sw.revoke(c)
			return fmt.Errorf("claim a warm sandbox as %s for %s: %w", c.name, c.taskFile, err)
		}
		return nil
	}
	sw.startWave().creating()
	ng, err := sw.openNet(ctx, c)
	var id string
	if err == nil {
		applyNet(&spec, ng)
		id, err = sw.m.eng.Create(ctx, spec)
	}
	if err != nil {
		sw.revoke(c)
		return fmt.Errorf("create container %s for %s: %w", c.name, c.taskFile, err)
	}
	sw.mu.Lock()
	c.id, c.fresh = id, true
	sw.mu.Unlock()
	return nil
}

// discard undoes a Start that failed half-way: the containers it created
// are removed (running or not), the network and the git service's copy
// of the repository go as a refused start's do, and the swarm, its state
// file and its journals are forgotten.
func (sw *swarm) discard(ctx context.Context, created []*ctr, setup *startSetup) {
	for _, c := range created {
		if err := sw.m.eng.Remove(context.WithoutCancel(ctx), c.id); err != nil {
			sw.m.log.Warn("remove container of a failed start", "name", c.name, "err", err)
		}
		sw.revoke(c)
	}
	sw.close(ctx)
	setup.undo(ctx)
	if err := sw.store.Remove(context.WithoutCancel(ctx)); err != nil {
		sw.m.log.Warn("remove state of a failed start", "repo", sw.repo, "err", err)
	}
	if _, err := sw.store.RemoveJournals(func(id string) bool { return id != sw.id }); err != nil {
		sw.m.log.Warn("remove journals of a failed start", "repo", sw.repo, "err", err)
	}
}

// revoke ends c's git access (local mode) and model access.
func (sw *swarm) revoke(c *ctr) {
	sw.closeNet(c)
	if sw.local && sw.m.cfg.Git != nil {
		sw.m.cfg.Git.Revoke(sw.sandbox(c))
	}
	if sw.m.cfg.Models != nil {
		sw.m.cfg.Models.Revoke(sw.sandbox(c))
	}
}
