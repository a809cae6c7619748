package orchestrator

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

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
	// relock takes the repository's lock back after a fix-up's wait, and
	// unlock lets it go; a land holds it but while a fix-up runs.
	unlock func()
	relock func(context.Context) error
}

// fixer is the train's Fixer: a fix-up container per conflicted merge.
func (lr *landRun) fixer(b *ctr) land.Fixer {
	return func(ctx context.Context, lb land.Branch, base string, c land.Conflict) (string, error) {
		sw := lr.sw
		branch := strings.TrimPrefix(lr.tr.Ref, "refs/heads/") + "--fix-" + lb.Container
		taskPath := land.FixupTaskPath(lb.Container)
		tf := land.FixupTaskFile(branch, side(b), lr.sides(ctx, base, lb.Tip, c.Files), c)
		if err := tf.Validate(); err != nil {
			return "", fmt.Errorf("the fix-up's task file would be invalid: %w", err)
		}
		data, err := tf.Marshal()
		if err != nil {
			return "", err
		}
		if _, err := lr.tr.PrepareFixup(ctx, "refs/heads/"+branch, base, c, taskPath, data, lr.scratch); err != nil {
			return "", err
		}
		fc, err := sw.appendFixup(ctx, taskPath, tf)
		if err != nil {
			return "", fmt.Errorf("start the fix-up: %w", err)
		}
		sw.m.log.Info("land fix-up started", "swarm", sw.id, "container", fc.name, "for", lb.Container, "files", c.Files)
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
