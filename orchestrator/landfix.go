package orchestrator

import (
	"context"
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
	src     TipSource
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
		sw := lr.sw
		branch := strings.TrimPrefix(lr.tr.Ref, "refs/heads/") + "--fix-" + lb.Container
		taskPath := land.FixupTaskPath(lb.Container)
		fc := lr.earlierFixup(ctx, taskPath, branch, base)
		if fc == nil {
			var err error
			if fc, err = lr.startFixup(ctx, b, lb, branch, taskPath, base, c); err != nil {
				return "", err
			}
		}
		lr.progress(api.LandResult{Container: lb.Container, TaskFile: lb.TaskFile, Branch: b.branch, Outcome: api.LandFixing, Tip: lb.Tip, Files: c.Files, Fixup: fc.name})
		lr.unlock()
		st, werr := sw.awaitTerminal(ctx, fc)
		if err := lr.relock(ctx); err != nil {
			return "", err
		}
		if werr != nil {
			return "", werr
		}
		if st != state.StatusCompleted {
			return "", fmt.Errorf("the fix-up container %s ended %s", fc.name, st)
		}
		if sw.led.stories(fc.name)[land.FixupStoryID] != tasks.Completed {
			return "", fmt.Errorf("the fix-up agent in %s did not resolve it (its story failed: 'aimi swarm logs %s' says why)", fc.name, fc.name)
		}
		_, tip, err := lr.src.Received(contract.Sandbox{Swarm: sw.id, Container: fc.name}, branch)
		if err != nil || tip == "" {
			return "", fmt.Errorf("the fix-up container %s pushed nothing", fc.name)
		}
		return lr.tr.FixedTree(ctx, tip, c, taskPath, lr.scratch)
	}
}

// startFixup makes the fix-up's branch and starts its container.
func (lr *landRun) startFixup(ctx context.Context, b *ctr, lb land.Branch, branch, taskPath, base string, c land.Conflict) (*ctr, error) {
	tf := land.FixupTaskFile(branch, side(b), lr.sides(ctx, base, lb.Tip, c.Files), c)
	if err := tf.Validate(); err != nil {
		return nil, fmt.Errorf("the fix-up's task file would be invalid: %w", err)
	}
	data, err := tf.Marshal()
	if err != nil {
		return nil, err
	}
	if _, err := lr.tr.PrepareFixup(ctx, "refs/heads/"+branch, base, c, taskPath, data, lr.scratch); err != nil {
		return nil, err
	}
	fc, err := lr.sw.appendFixup(ctx, taskPath, tf)
	if err != nil {
		return nil, fmt.Errorf("start the fix-up: %w", err)
	}
	lr.sw.m.log.Info("land fix-up started", "swarm", lr.sw.id, "container", fc.name, "for", lb.Container, "files", c.Files)
	return fc, nil
}

// earlierFixup is the fix-up an earlier land (cut short by a crash or a
// stop of the command) started for this merge: one still running, or one
// that completed on top of base whose work nobody took yet. nil: none.
func (lr *landRun) earlierFixup(ctx context.Context, taskPath, branch, base string) *ctr {
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
	// Its work must sit on this very base: the fix-up commit's parent.
	if parent, err := landGit.RevParse(ctx, lr.tr.Dir, tip+"~"+fmt.Sprint(max(1, commitsAfter(ctx, lr.tr.Dir, base, tip)))); err != nil || parent != base {
		return nil
	}
	return found
}

// commitsAfter counts the commits of tip's first-parent line after base.
func commitsAfter(ctx context.Context, dir, base, tip string) int {
	out, err := landGit.Run(ctx, dir, "rev-list", "--count", "--first-parent", base+".."+tip)
	if err != nil {
		return 0
	}
	n := 0
	fmt.Sscan(strings.TrimSpace(out), &n)
	return n
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
