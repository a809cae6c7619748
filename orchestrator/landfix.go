package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// landRun is one land of a swarm: its train and what landed so far (the
// other sides a fix-up's prompt quotes).
type landRun struct {
	sw      *swarm
	src     receivedTips
	tr      *land.Train
	scratch string
	landed  []*ctr
	// progress records a branch's state while the land goes on.
	progress func(api.LandResult)
	// relock takes the repository's lock back after a fix-up's wait, and
	// unlock lets it go; a land holds it but while a fix-up runs.
	unlock func()
	relock func(context.Context) error
}

// fixer is the train's Fixer: a fix-up container per conflicted merge
// (or the one a land cut short by a crash left running or done).
func (lr *landRun) fixer(b *ctr) land.Fixer {
	return func(ctx context.Context, lb land.Branch, base string, c land.Conflict) (string, error) {
		branch := strings.TrimPrefix(lr.tr.Ref, "refs/heads/") + "--fix-" + lb.Container
		taskPath := land.FixupTaskPath(lb.Container)
		tf := func() *tasks.File {
			return land.FixupTaskFile(branch, side(b), lr.sides(ctx, base, lb.Tip, c.Files), c)
		}
		shown := api.LandResult{Container: lb.Container, TaskFile: lb.TaskFile, Branch: b.branch, Outcome: api.LandFixing, Tip: lb.Tip, Files: c.Files}
		o := landOwn{taskPath: taskPath, branch: branch, base: base, tree: c.Tree, tf: tf, shown: shown, reuse: true}
		attempts := lr.sw.m.fixAttempts()
		err := errors.New("land.fix_attempts is 0: no fix-up is tried")
		for range attempts {
			var tree string
			if tree, err = lr.fixOnce(ctx, o, c); err == nil || ctx.Err() != nil {
				return tree, err
			}
			o.reuse = false // a later attempt is a new fix-up, not the one an earlier land left
		}
		return "", fmt.Errorf("%w (%d fix-up(s) tried)", err, attempts)
	}
}

// fixOnce runs one fix-up and returns the merge's tree it made.
func (lr *landRun) fixOnce(ctx context.Context, o landOwn, c land.Conflict) (string, error) {
	fc, tip, err := lr.runOwn(ctx, o)
	if err != nil {
		return "", err
	}
	if tip == "" {
		return "", fmt.Errorf("the fix-up agent in %s did not resolve it (its story failed: 'aimi swarm logs %s' says why)", fc.name, fc.name)
	}
	return lr.tr.FixedTree(ctx, tip, c, o.taskPath, lr.scratch)
}

// fixAttempts is land.fix_attempts: the Config's, 1 when unset, none
// when negative.
func (m *Manager) fixAttempts() int {
	switch n := m.cfg.LandFixAttempts; {
	case n == 0:
		return 1
	case n < 0:
		return 0
	default:
		return n
	}
}

// checker is the train's Check when the swarm has a verify command: a
// container whose runner runs it on the merged tree (no agent turn).
func (lr *landRun) checker(b *ctr) land.Check {
	if lr.sw.m.cfg.LandVerifyCommand == "" && lr.sw.m.cfg.RunnerEnv[contract.EnvVerifyCommand] == "" {
		return nil
	}
	return func(ctx context.Context, merge string) (bool, string, error) {
		tree, err := landGit.Run(ctx, lr.tr.Dir, "rev-parse", merge+"^{tree}")
		if err != nil {
			return false, "", err
		}
		branch := strings.TrimPrefix(lr.tr.Ref, "refs/heads/") + "--verify-" + b.name
		tf := func() *tasks.File { return land.VerifyTaskFile(branch, b.name) }
		shown := api.LandResult{Container: b.name, TaskFile: b.taskFile, Branch: b.branch, Outcome: api.LandVerifying}
		vc, tip, err := lr.runOwn(ctx, landOwn{taskPath: land.VerifyTaskPath(b.name), branch: branch, base: merge, tree: strings.TrimSpace(tree), tf: tf, shown: shown, reuse: true})
		if err != nil {
			return false, "", err
		}
		if tip == "" {
			lr.sw.mu.Lock()
			why := vc.lastOutput
			lr.sw.mu.Unlock()
			return false, fmt.Sprintf("%s (in %s; 'aimi swarm logs %s' has all of it)", oneLine(why), vc.name, vc.name), nil
		}
		return true, "", nil
	}
}

// landOwn is one of a land's own runs: a container of the swarm on
// branch, whose workspace is tree (plus its task file at taskPath) on top
// of base.
type landOwn struct {
	taskPath, branch, base, tree string
	tf                           func() *tasks.File
	shown                        api.LandResult // the record's entry while it runs
	// reuse: a run an earlier land left (running, or done on base) is
	// taken instead of a new one.
	reuse bool
}

// runOwn runs o (or waits for the one an earlier land left running or
// done) and returns its container and the tip it pushed: "" when its
// story did not complete.
func (lr *landRun) runOwn(ctx context.Context, o landOwn) (*ctr, string, error) {
	sw := lr.sw
	var fc *ctr
	if o.reuse {
		fc = lr.earlierRun(ctx, o.taskPath, o.branch, o.base)
	}
	if fc == nil {
		var err error
		if fc, err = lr.startOwn(ctx, o); err != nil {
			return nil, "", err
		}
	}
	o.shown.Fixup = fc.name
	lr.progress(o.shown)
	lr.unlock()
	st, werr := sw.awaitTerminal(ctx, fc)
	if err := lr.relock(ctx); err != nil {
		return nil, "", err
	}
	if werr != nil {
		return nil, "", werr
	}
	if st != state.StatusCompleted {
		return nil, "", fmt.Errorf("the land's container %s ended %s", fc.name, st)
	}
	if sw.led.stories(fc.name)[land.FixupStoryID] != tasks.Completed {
		return fc, "", nil
	}
	if err := lr.refresh(ctx, o.branch); err != nil {
		return nil, "", err
	}
	_, tip, err := lr.src.Received(contract.Sandbox{Swarm: sw.id, Container: fc.name}, o.branch)
	if err != nil || tip == "" {
		return nil, "", fmt.Errorf("the land's container %s pushed nothing", fc.name)
	}
	return fc, tip, nil
}

// startOwn makes o's branch and starts its container.
func (lr *landRun) startOwn(ctx context.Context, o landOwn) (*ctr, error) {
	tf := o.tf()
	if err := tf.Validate(); err != nil {
		return nil, fmt.Errorf("the land's task file %s would be invalid: %w", o.taskPath, err)
	}
	data, err := tf.Marshal()
	if err != nil {
		return nil, err
	}
	if _, err := lr.tr.PrepareFixup(ctx, "refs/heads/"+o.branch, o.base, land.Conflict{Tree: o.tree}, o.taskPath, data, lr.scratch); err != nil {
		return nil, err
	}
	if err := lr.share(ctx, o.branch); err != nil {
		return nil, err
	}
	fc, err := lr.sw.appendFixup(ctx, o.taskPath, tf)
	if err != nil {
		return nil, fmt.Errorf("start the land's container for %s: %w", o.taskPath, err)
	}
	lr.sw.m.log.Info("land container started", "swarm", lr.sw.id, "container", fc.name, "taskFile", o.taskPath)
	return fc, nil
}

// earlierRun is the run an earlier land (cut short by a crash or a stop
// of the command) started for this merge: one still running, or one that
// completed on top of base whose work nobody took yet. nil: none.
func (lr *landRun) earlierRun(ctx context.Context, taskPath, branch, base string) *ctr {
	sw := lr.sw
	var found *ctr
	for _, c := range sw.list() {
		if c.taskFile == taskPath {
			found = c // the newest of them: names are planned in order
		}
	}
	if found == nil {
		return nil
	}
	if st := sw.led.status(found.name); !st.Terminal() {
		return found
	}
	_, tip, err := lr.src.Received(contract.Sandbox{Swarm: sw.id, Container: found.name}, branch)
	if err != nil || tip == "" || sw.led.status(found.name) != state.StatusCompleted {
		return nil
	}
	// Its work must sit on this very base (an older one's would undo what
	// landed since).
	if on, err := landGit.IsAncestor(ctx, lr.tr.Dir, base, tip); err != nil || !on {
		return nil
	}
	return found
}

// side is a container's task file for a fix-up's prompt.
func side(c *ctr) land.Side { return land.Side{Container: c.name, TaskFile: c.taskFile, File: c.tf} }

// sides are the landed containers whose branches changed the conflicted
// files (all landed ones when none did, or git cannot tell).
func (lr *landRun) sides(ctx context.Context, base, tip string, files []string) []land.Side {
	var out []land.Side
	for _, c := range lr.landed {
		_, ctip, err := lr.src.Received(contract.Sandbox{Swarm: lr.sw.id, Container: c.name}, c.branch)
		if err != nil || ctip == "" {
			continue
		}
		args := append([]string{"diff", "--name-only", base + "..." + ctip, "--"}, files...)
		if out2, err := landGit.Run(ctx, lr.tr.Dir, args...); err == nil && strings.TrimSpace(out2) == "" {
			continue
		}
		out = append(out, side(c))
	}
	return out
}

// appendFixup adds a fix-up container to the swarm and starts it, as an
// appended task file would be (its task file is in its branch only).
func (sw *swarm) appendFixup(ctx context.Context, taskPath string, tf *tasks.File) (*ctr, error) {
	if err := sw.ensureNetwork(ctx); err != nil {
		return nil, err
	}
	named, stale := sw.planNames(ctx, []plannedTask{{path: taskPath, tf: tf}})
	if err := sw.takeStale(ctx, stale); err != nil {
		return nil, err
	}
	created, err := sw.createAll(ctx, named)
	if err != nil {
		for _, c := range created {
			_ = sw.m.eng.Remove(context.WithoutCancel(ctx), c.id)
		}
		return nil, err
	}
	return created[0], nil
}

// awaitTerminal waits for c's terminal status and its supervisor's end.
func (sw *swarm) awaitTerminal(ctx context.Context, c *ctr) (state.ContainerStatus, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if st := sw.led.status(c.name); st.Terminal() {
			sw.mu.Lock()
			done := c.done
			sw.mu.Unlock()
			if done != nil {
				select {
				case <-done:
				case <-ctx.Done():
					return st, ctx.Err()
				}
			}
			return st, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return "", fmt.Errorf("land: waiting for the fix-up %s: %w", c.name, ctx.Err())
		}
	}
}

// landScratch is where a land keeps its temporary indexes.
func (m *Manager) landScratch(sw *swarm) string { return filepath.Join(m.cfg.RadarDir, "land-"+sw.id) }
