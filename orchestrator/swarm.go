package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// swarm is one repository's swarm in memory.
type swarm struct {
	m      *Manager
	id     string
	repo   string
	repoID string // RepoID(repo) when the swarm was made or adopted
	max    int
	image  string
	// baseImage is the sandbox image the start asked for; image is its
	// repository's workspace image on it when there is one.
	baseImage string
	wsBase    string // the commit image's workspace is at, when a start found it
	local     bool
	repoURL   string // remote mode: origin
	network   string
	store     *state.Store
	led       *ledger

	// slots bounds the running containers, first queued first served.
	slots *limiter

	// foreign are the state entries adoption left alone: their container
	// is not this swarm's (another tool's, another swarm's, an edited id).
	// Cleanup reports them and keeps them in the file.
	foreign []api.Kept

	mu      sync.Mutex
	ctrs    []*ctr
	gateway string      // local mode: the network's gateway, where git is served
	wave    *startWave  // its containers starting now (startWave); nil until the first
	radar   *swarmRadar // the conflict radar, from the first push on (radarKick)
	origin  *originCopy // remote mode: the daemon's copy of origin, from first use

	// landing is held by the swarm's one land at a time (Land); lastLand
	// is its record, landRead whether the state file's was read (guarded
	// by mu).
	landing  sync.Mutex
	lastLand *api.LandReport
	landRead bool
	landSeq  int64 // the land journal's last seq (guarded by mu)
	// costs folds the journals of the containers a land shows.
	costs costFolds

	// attempts is how many times a start of this swarm runs each task
	// file, attemptsStop its swarm.attempts_stop; groups are the task
	// files run several times, by path (guarded by mu; attempts.go).
	attempts     int
	attemptsStop string
	groups       map[string]*attemptGroup
}

// ctr is one container of a swarm. Its fields from id on are guarded by
// the swarm's mu; name, taskFile, branch and tf are set while the start
// plans it, before any other goroutine sees it (a name taken meanwhile is
// changed under the swarm's mu, before the container exists).
type ctr struct {
	name     string
	taskFile string
	branch   string
	tf       *tasks.File // nil if the task file went missing after a restart

	id          string
	repoURL     string
	stopReq     bool
	stopCh      chan struct{} // closed by Stop
	done        chan struct{} // closed when the supervisor returns; nil = none ran
	exitCode    *int
	oom         bool
	errs        []api.ErrorDetail // at most maxErrors (addError)
	errsOmitted int
	lastOutput  string
	rejected    int
	prURL       *string // from Publish (local mode)
	fresh       bool    // created by this Manager, not yet supervised
	// created is closed once createAll created the container and saved
	// its entry: its supervisor, launched before, starts it no earlier.
	// nil for a container that existed before (adopted, or older).
	created chan struct{}
	node    string // cluster node it runs on ("" on a single engine)
	// pushFailed: it reported GIT_PUSH_FAILED; unpushed, the commits it
	// named (unpushed.go).
	pushFailed bool
	unpushed   []string
	// overBudget: its run ended with BUDGET_EXCEEDED (budget.go).
	overBudget bool
	// egressDenied and gitRefused count the requests the egress proxy
	// and the git service refused it (journaled, one record each).
	egressDenied, gitRefused int
	// leaveWave takes the container out of its swarm's start wave
	// (startWave); nil when it is not in one.
	leaveWave func()
	// branchExists: whether the repository held branch when it was
	// granted (nil: unknown, e.g. adopted after a restart, or a remote
	// repository); it goes into the task-request.
	branchExists *bool
	// warm: a sandbox claimed from the warm pool, whose runner waits for
	// its claim lines (sendClaim) before the task-request. claimEnv and
	// claimMounts are what they carry, held in memory only until sent.
	warm        bool
	claimEnv    []string
	claimMounts []engine.Mount
	// claimed is the engine's view of a claimed sandbox at its claim
	// (running): its start neither starts nor inspects it again. Taken
	// once; nil otherwise.
	claimed *engine.Info
	// attempt is c's number among its task file's attempts (1-based), 0
	// for a task file run once; variant the agent.variants entry it runs.
	attempt int
	variant string
}

// leaveWave takes c out of the start wave, if it is in one.
func (sw *swarm) leaveWave(c *ctr) {
	sw.mu.Lock()
	leave := c.leaveWave
	c.leaveWave = nil
	sw.mu.Unlock()
	if leave != nil {
		leave()
	}
}

func (sw *swarm) find(name string) *ctr {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, c := range sw.ctrs {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (sw *swarm) list() []*ctr {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return slices.Clone(sw.ctrs)
}

// supervised reports whether a supervisor is running for c.
func (sw *swarm) supervised(c *ctr) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return c.supervisedLocked()
}

// supervisedLocked is supervised for a caller holding sw.mu.
func (c *ctr) supervisedLocked() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (sw *swarm) terminal(name string) bool {
	return sw.led.status(name).Terminal()
}

// active reports whether any container is pending or running.
func (sw *swarm) active() bool {
	for _, c := range sw.led.snapshot().Containers {
		if !c.Status.Terminal() {
			return true
		}
	}
	return false
}

func (sw *swarm) openLedger(ctx context.Context, st *state.Swarm, fresh bool) error {
	opts := sw.m.recorderOptions()
	if fresh {
		// A new swarm replaces whatever state file the repo had.
		if err := sw.store.Save(ctx, st); err != nil {
			return fmt.Errorf("write the new swarm state: %w", err)
		}
	}
	sw.led = newLedger(sw.store, st, opts)
	return nil
}

func (sw *swarm) closeLedger(ctx context.Context) error {
	if sw.led == nil {
		return nil
	}
	return sw.led.close(ctx)
}

// close lets go of a swarm the Manager forgets (replaced or cleaned up).
func (sw *swarm) close(ctx context.Context) {
	if err := sw.closeLedger(ctx); err != nil {
		sw.m.log.Warn("close swarm state", "repo", sw.repo, "swarm", sw.id, "err", err)
	}
}

func (sw *swarm) labels() map[string]string {
	return sw.m.selector(map[string]string{contract.LabelSwarmID: sw.id, contract.LabelProject: sw.repo, contract.LabelRepoID: sw.repoID})
}

func (sw *swarm) ensureNetwork(ctx context.Context) error {
	var info engine.NetworkInfo
	if sw.m.cfg.Net != nil {
		// No network: the sandboxes reach the git service and the model
		// gateway through their sockets, which forward to their
		// listeners on the loopback.
		info.Gateway = serviceAddr
	} else {
		var err error
		if info, err = sw.m.eng.EnsureNetwork(ctx, sw.network, sw.labels()); err != nil {
			return fmt.Errorf("create the swarm network %s: %w", sw.network, err)
		}
	}
	if sw.local {
		if err := sw.m.cfg.Git.ListenOn(ctx, info.Gateway); err != nil {
			return fmt.Errorf("start the git service on %s (the swarm network's gateway): %w", info.Gateway, err)
		}
	}
	if sw.m.cfg.Models != nil && sw.m.cfg.Net == nil {
		if err := sw.m.cfg.Models.ListenOn(ctx, info.Gateway); err != nil {
			return fmt.Errorf("start the model gateway on %s (the swarm network's gateway): %w", info.Gateway, err)
		}
	}
	if sw.local || sw.m.cfg.Models != nil {
		sw.mu.Lock()
		sw.gateway = info.Gateway
		sw.mu.Unlock()
	}
	return nil
}

// sandbox names c of this swarm to the services that grant it access.
func (sw *swarm) sandbox(c *ctr) contract.Sandbox {
	return contract.Sandbox{Swarm: sw.id, Container: c.name}
}

// branchOf is c's branch in the swarm's repository, as the git service
// and the publisher take it.
func (sw *swarm) branchOf(c *ctr) contract.ContainerBranch {
	return contract.ContainerBranch{Repo: sw.repo, Swarm: sw.id, Container: c.name, Branch: c.branch, Prefilled: contract.IsWorkspaceImage(sw.image), Base: sw.wsBase}
}

// gatewayIP is the swarm network's gateway, "" until ensureNetwork ran.
func (sw *swarm) gatewayIP() string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.gateway
}

// append adds task files to the active swarm.
func (sw *swarm) append(ctx context.Context, req api.StartRequest) (api.SwarmView, error) {
	existing := map[string]string{}
	for _, c := range sw.list() {
		existing[c.taskFile] = taskBranch(c)
	}
	planned, err := validateTasks(ctx, sw.repo, req.TaskFiles, existing, sw.local)
	if err != nil {
		return api.SwarmView{}, err
	}
	if req.Local != sw.local {
		return api.SwarmView{}, fmt.Errorf("%w: the active swarm runs in %s mode; append in the same mode", api.ErrInvalidRequest, map[bool]string{true: "local", false: "remote"}[sw.local])
	}
	// An adopted swarm may have no network on the engine: one whose
	// containers all finished and were removed, or another tool's.
	if err := sw.ensureNetwork(ctx); err != nil {
		return api.SwarmView{}, err
	}
	sw.setAttempts(req)
	named, err := sw.nameAndTake(ctx, planned, req.TaskFiles, existing)
	if err != nil {
		return api.SwarmView{}, err
	}
	created, err := sw.createAll(ctx, named)
	if err != nil {
		// The swarm goes on; only what this request created goes away.
		for _, c := range created {
			_ = sw.m.eng.Remove(context.WithoutCancel(ctx), c.id)
		}
		return api.SwarmView{}, fmt.Errorf("%w (the active swarm is unchanged apart from %d removed containers; their entries stay pending until cleanup)", err, len(created))
	}
	sw.saveAttempts(ctx)
	return sw.view(), nil
}

// stop asks the named (or all non-terminal) containers to stop and waits
// until their supervisors are done.
func (sw *swarm) stop(ctx context.Context, names []string) error {
	var targets []*ctr
	if len(names) == 0 {
		targets = sw.list()
	} else {
		for _, n := range names {
			c := sw.find(n)
			if c == nil && sw.foreignEntry(n) != "" {
				return fmt.Errorf("%w: %q: its state entry names a container the daemon left alone: %s", api.ErrUnknownContainer, n, sw.foreignEntry(n))
			}
			if c == nil {
				return fmt.Errorf("%w: %q", api.ErrUnknownContainer, n)
			}
			targets = append(targets, c)
		}
	}
	var waits []chan struct{}
	var waitNames []string
	for _, c := range targets {
		if sw.terminal(c.name) {
			continue
		}
		sw.mu.Lock()
		if !c.stopReq {
			c.stopReq = true
			close(c.stopCh)
		}
		done := c.done
		sw.mu.Unlock()
		if !sw.supervised(c) {
			// Nobody watches it (a pending container of a swarm adopted
			// without launching): the supervisor sees the stop at once.
			done = sw.launch(c, modeFresh)
		}
		if done != nil {
			waits = append(waits, done)
			waitNames = append(waitNames, c.name)
		}
	}
	// Bounded: the engine's stop call has its own deadline, but a
	// container whose end the engine never reports must not hang the stop.
	limit := sw.m.cfg.StopGrace + sw.m.cfg.StopWait
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for i, d := range waits {
		select {
		case <-d:
		case <-ctx.Done():
			return fmt.Errorf("waiting for containers to stop: %w", ctx.Err())
		case <-timer.C:
			return fmt.Errorf("stop: %s did not end within %s (the engine has not reported its end, or its last output is still being read; the stop is recorded when it ends; `aimi swarm stop` may be repeated)",
				strings.Join(notDone(waits[i:], waitNames[i:]), ", "), limit)
		}
	}
	return nil
}

// notDone names the waits whose channel is still open.
func notDone(waits []chan struct{}, names []string) []string {
	var out []string
	for i, d := range waits {
		select {
		case <-d:
		default:
			out = append(out, names[i])
		}
	}
	return out
}

// resume starts what has no supervisor and, with retryFailed, reruns the
// failed containers and those completed with failed stories (retryable) in
// new containers with a fresh fold.
func (sw *swarm) resume(ctx context.Context, retryFailed bool) error {
	var retry []*ctr
	for _, c := range sw.list() {
		st := sw.led.status(c.name)
		switch {
		case retryFailed && sw.retryable(c), sw.overBudget(st, c):
			retry = append(retry, c)
		case !st.Terminal() && !sw.supervised(c):
			sw.launch(c, modeFresh)
		}
	}
	if len(retry) == 0 {
		return nil
	}
	for _, c := range retry {
		if c.tf == nil {
			return fmt.Errorf("rerun %s: its task file %s could not be read; fix it first", c.name, c.taskFile)
		}
		if sw.supervised(c) {
			<-c.done // a failed container's supervisor is finishing
		}
	}
	// What a failed container did is taken out of it before a new
	// container replaces it; when that fails nothing is rerun.
	for _, c := range retry {
		if err := sw.m.takeWork(ctx, sw.repo, sw.holder(c), false); err != nil {
			return err
		}
	}
	// New containers next (Create replaces the exited ones of the same
	// name), then a fresh journal and fold for each.
	for _, c := range retry {
		sw.mu.Lock()
		c.stopReq, c.stopCh = false, make(chan struct{})
		c.exitCode, c.oom, c.errs, c.errsOmitted, c.lastOutput, c.rejected, c.prURL = nil, false, nil, 0, "", 0, nil
		c.overBudget = false
		sw.mu.Unlock()
		if err := sw.create(ctx, c, nil); err != nil {
			return err
		}
	}
	retried := map[string]bool{}
	before := map[string]map[string]tasks.Status{}
	for _, c := range retry {
		retried[c.name] = true
		before[c.name] = sw.led.stories(c.name)
	}
	all := sw.list()
	err := sw.led.rebuild(ctx, func(context.Context) error {
		var errs []error
		for _, c := range retry {
			errs = append(errs, moveAside(sw.store.JournalPath(sw.sandbox(c))))
		}
		errs = append(errs, sw.reopenStopped(ctx, retry))
		return errors.Join(errs...)
	}, all, func(c *ctr, old *state.Container) (*state.Container, *state.Tracker, error) {
		sc, t, err := sw.restoreEntry(c, old, retried[c.name])
		if err == nil && retried[c.name] {
			t = state.NewTracker(keepFinished(c.tf, before[c.name]))
		}
		return sc, t, err
	})
	if err != nil {
		return err
	}
	for _, c := range retry {
		sw.launch(c, modeFresh)
	}
	return nil
}

// restoreEntry rebuilds a container's state entry and fold from its journal
// (fresh: from nothing, as a new pending container).
func (sw *swarm) restoreEntry(c *ctr, old *state.Container, fresh bool) (*state.Container, *state.Tracker, error) {
	now := time.Now().UTC()
	sw.mu.Lock()
	sc := &state.Container{ContainerID: c.id, ContainerName: c.name, TaskFilePath: c.taskFile,
		BranchName: c.branch, Status: state.StatusPending, CreatedAt: now, UpdatedAt: now}
	sw.mu.Unlock()
	if fresh {
		return sc, state.NewTracker(c.tf), nil
	}
	jpath := sw.store.JournalPath(sw.sandbox(c))
	t, _, err := state.RestoreTracker(jpath, rerunBase(jpath, c.tf))
	if err != nil {
		return nil, nil, err
	}
	if old != nil {
		sc.CreatedAt, sc.ACPPID = old.CreatedAt, old.ACPPID
	}
	return sc, t, nil
}

// cleanup removes terminal containers and their state entries.
func (sw *swarm) cleanup(ctx context.Context, force bool) (api.CleanupReport, error) {
	rep := api.CleanupReport{RepoPath: sw.repo, Removed: []string{}, Kept: []api.Kept{}}
	for _, k := range sw.foreign {
		rep.Kept = append(rep.Kept, api.Kept{Name: k.Name, Reason: "state entry left alone: " + k.Reason})
	}
	var keep, gone []*ctr
	for _, c := range sw.list() {
		st := sw.led.status(c.name)
		if !st.Terminal() {
			rep.Kept = append(rep.Kept, api.Kept{Name: c.name, Reason: fmt.Sprintf("still %s; stop it first", st)})
			keep = append(keep, c)
			continue
		}
		if sw.keepUnreceived(ctx, c, force, &rep) {
			keep = append(keep, c)
			continue
		}
		gone = append(gone, c)
	}
	// Only what holds no unreceived work is removed, several at once: a
	// removal waits on the engine (on a cluster, seconds for a service and
	// its objects), and a swarm's containers are independent.
	sw.keepBeforeCleanup(ctx, gone)
	failed := sw.removeAll(ctx, gone)
	var drop []*ctr
	for i, c := range gone {
		if err := failed[i]; err != nil && !errors.Is(err, engine.ErrLeftOnNode) {
			rep.Kept = append(rep.Kept, api.Kept{Name: c.name, Reason: "not removed: " + err.Error()})
			keep = append(keep, c)
			continue
		} else if err != nil {
			rep.Notes = append(rep.Notes, err.Error())
		}
		sw.revoke(c)
		drop = append(drop, c)
		rep.Removed = append(rep.Removed, c.name)
	}
	if len(drop) == 0 {
		return rep, nil
	}
	// What was removed leaves the state file even when a forced cleanup's
	// time ran out during the removals.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateWriteWait)
	defer cancel()
	dropped := map[string]bool{}
	for _, c := range drop {
		dropped[c.name] = true
	}
	if len(keep) == 0 && len(sw.foreign) == 0 {
		if err := sw.led.close(ctx); err != nil {
			return rep, err
		}
		if err := sw.store.Remove(ctx); err != nil {
			return rep, err
		}
		rep.StateRemoved = true
		if err := sw.m.eng.RemoveNetworkIfUnused(ctx, sw.network); err != nil {
			sw.m.log.Warn("remove swarm network", "network", sw.network, "err", err)
		}
		return rep, nil
	}
	err := sw.led.rebuild(ctx, func(ctx context.Context) error {
		return sw.store.Update(ctx, func(s *state.Swarm) error {
			s.Containers = slices.DeleteFunc(s.Containers, func(c *state.Container) bool { return dropped[c.ContainerName] })
			return nil
		})
	}, keep, func(c *ctr, old *state.Container) (*state.Container, *state.Tracker, error) {
		return sw.restoreEntry(c, old, false)
	})
	sw.mu.Lock()
	sw.ctrs = slices.DeleteFunc(sw.ctrs, func(c *ctr) bool { return dropped[c.name] })
	sw.mu.Unlock()
	return rep, err
}

// noteMessage keeps what the view shows of a folded or rejected message.
func (sw *swarm) noteMessage(c *ctr, res lineResult) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.noteMessageLocked(c, res)
}

func (sw *swarm) noteMessageLocked(c *ctr, res lineResult) {
	if res.invalid != "" || res.rejected != "" {
		c.rejected++
		return
	}
	switch p := res.msg.Payload.(type) {
	case *acpmsg.ProgressUpdate:
		if p.Output != "" {
			c.lastOutput = p.Output
		}
	case *acpmsg.ErrorPayload:
		c.addError(api.ErrorDetail{Code: p.Code, Message: p.Message})
		c.notePushFailed(p.Code, p.Message)
	case *acpmsg.Completion:
		for _, e := range p.Errors {
			c.addError(api.ErrorDetail{Message: e})
			c.notePushFailed("", e)
			c.noteBudget(e)
		}
	}
}

// event publishes a change of c.
func (sw *swarm) event(c *ctr, kind api.EventKind, fill func(*api.Event)) {
	e := api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: c.name, Kind: kind, Status: string(sw.led.status(c.name))}
	if fill != nil {
		fill(&e)
	}
	sw.m.publish(e)
}

// finishedAll publishes swarm-finished once every container is terminal.
func (sw *swarm) checkFinished() {
	snap := sw.led.snapshot()
	for _, c := range snap.Containers {
		if !c.Status.Terminal() {
			return
		}
	}
	sw.m.publish(api.Event{SwarmID: sw.id, RepoPath: sw.repo, Kind: api.EventSwarmFinished})
}
