package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/publish"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// LandBranchPrefix starts the name of a swarm's integration branch:
// aimi/land/<swarm id, first 8>.
const LandBranchPrefix = "aimi/land/"

// landGit is the git of a land: the daemon's own repository, hermetic.
var landGit = gitcmd.Hermetic

// Land lands the swarm's completed containers' branches (local mode):
// one merge commit each onto the integration branch started at the
// landing target, in the service's repository, then the integration
// branch into the checkout. A branch that would conflict with what landed
// before it is held with its files; the rest go on.
func (m *Manager) Land(ctx context.Context, req api.LandRequest) (api.LandReport, error) {
	return m.land(ctx, req, nil)
}

// land is Land; with only set (land.auto) it lands those containers
// alone and waits its turn behind a land that runs instead of refusing.
func (m *Manager) land(ctx context.Context, req api.LandRequest, only []string) (api.LandReport, error) {
	sw, unlock, err := m.lockedSwarm(ctx, req.RepoPath)
	if err != nil {
		return api.LandReport{}, err
	}
	rl := &repoLock{m: m, sw: sw, unlock: unlock, locked: true}
	defer rl.release()
	src, err := sw.landSource(ctx)
	if err != nil {
		return api.LandReport{}, err
	}
	if err := rl.landing(ctx, only != nil); err != nil {
		return api.LandReport{}, err
	}
	defer sw.landing.Unlock()
	queue, skipped, err := sw.landQueue(req.Order)
	if err != nil {
		return api.LandReport{}, err
	}
	if only != nil {
		queue = slices.DeleteFunc(queue, func(c *ctr) bool { return !slices.Contains(only, c.name) })
		skipped = nil
	}
	branch := LandBranchPrefix + sw.id[:min(8, len(sw.id))]
	rep := api.LandReport{RepoPath: sw.repo, Branch: branch, Results: []api.LandResult{}, Skipped: skipped}
	if prev := sw.landView(); only != nil && prev != nil && prev.Branch == branch {
		rep.Results = append(rep.Results, prev.Results...) // a train: what landed before stays in the record
	}
	mirror, tr, err := sw.landTrain(ctx, src, req.Onto, branch, &rep)
	if err != nil {
		return rep, err
	}
	lr := &landRun{sw: sw, src: src, tr: tr, scratch: m.landScratch(sw), unlock: rl.release, relock: rl.take}
	defer os.RemoveAll(lr.scratch)
	lr.progress = func(r api.LandResult) {
		rep.Results = withResult(rep.Results, r)
		sw.noteLand(&rep)
		sw.journalResult(r)
	}
	rep.Running = true
	sw.noteLand(&rep)
	sw.journalLand("land of %d branch(es) onto %s (%.12s) as %s", len(queue), rep.Onto, rep.OntoCommit, branch)
	defer func() { rep.Running = false; sw.noteLand(&rep) }()
	for _, c := range queue {
		res, err := lr.landOne(ctx, c)
		if err != nil {
			sw.journalLand("land stopped at %s: %v", c.name, err)
			rep.Cut = true
			return rep, err
		}
		lr.progress(res)
		m.log.Info("land", "swarm", sw.id, "container", c.name, "outcome", res.Outcome, "reason", res.Reason)
		if res.Outcome != string(land.Held) {
			sw.radarKick() // the radar's target moved: what still works is looked at against it
		}
	}
	m.cfg.LandHook.At(ctx, land.PointAllLanded, "")
	if err := lr.bringIn(ctx, mirror, &rep); err != nil {
		sw.journalLand("land stopped: %v", err)
		rep.Cut = true
		return rep, err
	}
	sw.journalLand("land done: %s at %.12s; %s", branch, rep.Tip, cmp.Or(rep.Take, "-"))
	rep.Running = false // the deferred save writes it; the answer is a copy, with the costs
	return *sw.withCosts(&rep), nil
}

// bringIn brings the integration branch into the checkout when it holds
// anything, and says how to take it.
func (lr *landRun) bringIn(ctx context.Context, mirror string, rep *api.LandReport) error {
	tip, err := lr.tr.Tip(ctx)
	if err != nil || tip == rep.OntoCommit {
		rep.Tip = tip
		return err
	}
	rep.Tip = tip
	if o, ok := lr.src.(*originCopy); ok {
		return lr.pushLand(ctx, o, rep)
	}
	cb := contract.ContainerBranch{Repo: lr.sw.repo, Branch: rep.Branch}
	if _, err := publish.IntoCheckout(ctx, landGit, mirror, cb, ""); err != nil {
		return fmt.Errorf("land: bring %s into %s: %w", rep.Branch, lr.sw.repo, err)
	}
	rep.Take = fmt.Sprintf("git checkout %s && git merge --ff-only %s", rep.Onto, rep.Branch)
	return nil
}

// repoLock is a land's hold on its repository's lock, which it lets go
// while it waits (for a fix-up, or for another land's turn).
type repoLock struct {
	m      *Manager
	sw     *swarm
	unlock func()
	locked bool
}

func (rl *repoLock) release() {
	if rl.locked {
		rl.locked = false
		rl.unlock()
	}
}

// take takes the lock back, and checks the swarm is still the
// repository's.
func (rl *repoLock) take(ctx context.Context) error {
	u, err := rl.m.lockRepoCtx(ctx, rl.sw.repo)
	if err != nil {
		return err
	}
	rl.unlock, rl.locked = u, true
	if rl.m.getSwarm(rl.sw.repo) != rl.sw {
		return fmt.Errorf("land: the swarm of %s was replaced or cleaned up meanwhile", rl.sw.repo)
	}
	return nil
}

// landing takes the swarm's one land: at once, or (wait) after the land
// that runs, without holding the repository meanwhile.
func (rl *repoLock) landing(ctx context.Context, wait bool) error {
	if rl.sw.landing.TryLock() {
		return nil
	}
	if !wait {
		return fmt.Errorf("%w: a land of this swarm is running; wait for it to end", api.ErrInvalidRequest)
	}
	rl.release()
	rl.sw.landing.Lock()
	if err := rl.take(ctx); err != nil {
		rl.sw.landing.Unlock()
		return err
	}
	return nil
}

// autoLand lands c alone once it completed (land.auto), in the
// background: a push's publication never waits for a land.
func (sw *swarm) autoLand(c *ctr) {
	m := sw.m
	if !m.cfg.LandAuto || land.IsLandRun(c.taskFile) {
		return
	}
	if e := sw.led.snapshot().Container(c.name); e == nil || e.StoryProgress.Failed > 0 {
		return
	}
	m.wg.Go(func() {
		rep, err := m.land(m.life, api.LandRequest{RepoPath: sw.repo}, []string{c.name})
		if err != nil {
			m.log.Warn("land.auto: the land failed; 'aimi swarm land' tries again", "swarm", sw.id, "container", c.name, "err", err)
			return
		}
		for _, r := range rep.Results {
			m.log.Info("land.auto", "swarm", sw.id, "container", r.Container, "outcome", r.Outcome, "reason", r.Reason)
		}
	})
}

// withResult is rs with r in place of the container's earlier entry (a
// fix-up's "fixing"), or added.
func withResult(rs []api.LandResult, r api.LandResult) []api.LandResult {
	for i := range rs {
		if rs[i].Container == r.Container {
			rs[i] = r
			return rs
		}
	}
	return append(rs, r)
}

// noteLand saves the land's record; a record that cannot be written is
// logged (the land itself is in git, and goes on).
func (sw *swarm) noteLand(rep *api.LandReport) {
	if err := sw.saveLand(rep); err != nil {
		sw.m.log.Warn("land: the record was not written; status may show an older one", "swarm", sw.id, "err", err)
	}
	status := "done"
	if rep.Running {
		status = "running"
	}
	sw.m.publish(api.Event{SwarmID: sw.id, RepoPath: sw.repo, Kind: api.EventLandProgress, Status: status})
}

// landQueue is the completed containers in landing order (order first,
// then by completion), and the others with why they are not landed.
func (sw *swarm) landQueue(order []string) ([]*ctr, []api.Kept, error) {
	snap := sw.led.snapshot()
	done := map[string]time.Time{}
	var skipped []api.Kept
	for _, e := range snap.Containers {
		if land.IsLandRun(e.TaskFilePath) {
			continue // a land's own run, not work to land
		}
		switch {
		case e.Status == state.StatusCompleted && e.StoryProgress.Failed > 0 && !slices.Contains(order, e.ContainerName):
			skipped = append(skipped, api.Kept{Name: e.ContainerName, Reason: fmt.Sprintf("completed with %d failed stories: 'aimi swarm resume --retry-failed' reruns them; name it in --order to land its work as it is", e.StoryProgress.Failed)})
		case e.Status == state.StatusCompleted:
			done[e.ContainerName] = e.UpdatedAt
		default:
			skipped = append(skipped, api.Kept{Name: e.ContainerName, Reason: fmt.Sprintf("%s, not completed: only completed containers land", e.Status)})
		}
	}
	for _, n := range order {
		if _, ok := done[n]; !ok {
			return nil, nil, &api.FieldError{Field: "order", Reason: fmt.Sprintf("%q is not a completed container of the swarm; 'aimi swarm status' lists them", n)}
		}
	}
	var queue []*ctr
	for _, c := range sw.list() {
		if _, ok := done[c.name]; ok {
			queue = append(queue, c)
		}
	}
	queue, skipped = sw.onlyPicked(queue, skipped)
	rank := func(c *ctr) int {
		if i := slices.Index(order, c.name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(queue, func(a, b *ctr) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return done[a.name].Compare(done[b.name])
	})
	return queue, skipped, nil
}

// landTrain is the train of the swarm's repository: the landing target
// (onto, or the repository's HEAD branch) fetched from the checkout, so
// the integration branch starts at what the user has now.
func (sw *swarm) landTrain(ctx context.Context, src receivedTips, onto, branch string, rep *api.LandReport) (string, *land.Train, error) {
	if o, ok := src.(*originCopy); ok {
		return sw.landTrainRemote(ctx, o, onto, branch, rep)
	}
	var mirror string
	for _, c := range sw.list() {
		if repo, _, err := src.Received(contract.Sandbox{Swarm: sw.id, Container: c.name}, c.branch); err == nil {
			mirror = repo
			break
		}
	}
	if mirror == "" {
		return "", nil, fmt.Errorf("land: the swarm of %s has no repository in the git service (were its containers cleaned up?)", sw.repo)
	}
	if onto == "" {
		name, err := landGit.Run(ctx, sw.repo, "symbolic-ref", "--short", "HEAD")
		if err != nil {
			return "", nil, &api.FieldError{Field: "onto", Reason: "the checkout has no branch checked out; give one with --onto"}
		}
		onto = strings.TrimSpace(name)
	}
	ontoRef := "refs/aimi/land-onto/" + strings.TrimPrefix(branch, LandBranchPrefix)
	if _, err := landGit.Run(ctx, mirror, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", sw.repo, "+refs/heads/"+onto+":"+ontoRef); err != nil {
		return "", nil, &api.FieldError{Field: "onto", Reason: fmt.Sprintf("branch %q of %s could not be read: %v", onto, sw.repo, err)}
	}
	tr := &land.Train{Git: landGit, Dir: mirror, Ref: "refs/heads/" + branch, Onto: ontoRef, Hook: sw.m.cfg.LandHook}
	commit, err := landGit.RevParse(ctx, mirror, ontoRef)
	if err != nil {
		return "", nil, err
	}
	rep.Onto, rep.OntoCommit = onto, commit
	return mirror, tr, nil
}

// landOne lands one container's branch as the service received it.
func (lr *landRun) landOne(ctx context.Context, c *ctr) (api.LandResult, error) {
	sw := lr.sw
	out := api.LandResult{Container: c.name, TaskFile: c.taskFile, Branch: c.branch}
	_, tip, err := lr.src.Received(contract.Sandbox{Swarm: sw.id, Container: c.name}, c.branch)
	if err != nil || tip == "" {
		out.Outcome, out.Reason = string(land.Held), "the git service holds no push of its branch"
		return out, nil
	}
	b := land.Branch{Container: c.name, TaskFile: c.taskFile, Title: c.branch, Tip: tip}
	if c.tf != nil {
		b.Title = c.tf.Metadata.Title
	}
	for id, st := range sw.led.stories(c.name) {
		if st == tasks.Completed {
			b.Stories = append(b.Stories, id)
		}
	}
	slices.Sort(b.Stories)
	lr.tr.Fix, lr.tr.Check = lr.fixer(c), lr.checker(c)
	res, err := lr.tr.Land(ctx, b)
	if err != nil {
		return out, err
	}
	if res.Outcome != land.Held {
		lr.landed = append(lr.landed, c)
	}
	out.Outcome, out.Reason, out.Tip, out.Merge, out.Files, out.Verify = string(res.Outcome), res.Reason, res.Tip, res.Merge, res.Files, res.Verify
	return out, nil
}
