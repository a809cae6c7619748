package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// WarmPool hands running sandboxes to starts (package warmpool), so a start
// does not wait for the engine's create and start. nil: every container is
// created. The engine of a Manager with a pool must show claimed sandboxes
// with their claim's labels (warmpool.Overlay).
type WarmPool interface {
	// Claim renames a waiting sandbox of s's settings to s.Name and joins
	// it to s.Network (none: it stays on no network); ok false (nothing
	// done) when none fits. A name held by another container is
	// engine.ErrConflict, as from Create. info is the engine's inspect of
	// the running sandbox, taken by the claim.
	Claim(ctx context.Context, s engine.Spec) (info engine.Info, ok bool, err error)
	// Confirm says the state file holds these claimed containers.
	Confirm(ids ...string) error
	// Busy holds the pool's own creates back until done is called.
	Busy() (done func())
	// SocketDir is the host directory the pool mounted at
	// contract.NetDir in claimed sandbox id at its create ("" when none):
	// with a SandboxNet its sockets are served there from the claim on.
	SocketDir(id string) string
}

// poolHold bounds how long the pool's refill waits for a start's
// containers to reach their work.
const poolHold = 20 * time.Second

// poolBusy holds the pool's own creates back from a start on (nothing to
// do without a pool); release lets them go once the started swarm's
// containers work (holdPool), or at once when the start made none.
func (m *Manager) poolBusy() (release func(started **swarm)) {
	if m.cfg.Warm == nil {
		return func(**swarm) {}
	}
	done := m.cfg.Warm.Busy()
	return func(started **swarm) {
		if *started == nil {
			done()
			return
		}
		(*started).holdPool(done)
	}
}

// holdPool calls done (the pool may create again) once every container of
// sw works (a story in progress or over) or ended, or after poolHold: a
// refill's create and start would take the engine and the cores from their
// clones and agents' starts, which the user is waiting for.
func (sw *swarm) holdPool(done func()) { sw.afterWork(done) }

// afterWork calls fn once every container of sw works or ended, or after
// poolHold (or when the Manager ends).
func (sw *swarm) afterWork(fn func()) {
	sw.m.wg.Go(func() {
		defer fn()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for deadline := time.Now().Add(poolHold); time.Now().Before(deadline) && !sw.allWorking(); {
			select {
			case <-sw.m.life.Done():
				return
			case <-t.C:
			}
		}
	})
}

// allWorking reports whether every container of sw has had a story in
// progress, or ended.
func (sw *swarm) allWorking() bool {
	for _, c := range sw.led.snapshot().Containers {
		p := c.StoryProgress
		if !c.Status.Terminal() && p.InProgress+p.Completed+p.Failed == 0 {
			return false
		}
	}
	return true
}

// warmNote is the journal's note on the task-request of a claimed sandbox:
// the one place a claimed container differs from a created one.
const warmNote = "warm: a sandbox of the warm pool was claimed for this container"

// WarmSpec is the spec of a sandbox of image that a start of this Manager
// would create, without anything of a task (the pool's template).
func (m *Manager) WarmSpec(image string) engine.Spec {
	sw := &swarm{m: m, image: image, network: engine.NetworkNone}
	s := sw.createSpec(&ctr{name: "aimi-warm"}, nil, nil)
	s.Labels, s.Env, s.Mounts = m.selector(nil), nil, nil
	// The key tells sealed pool sandboxes from those a claim joins to a
	// network.
	s.Sealed = m.poolSealed()
	return s
}

// workspaces is the Manager's workspace images for a start in local git
// mode (the runner's question for the tip goes to the daemon's git
// service), nil when they are not used: remote mode, no images, or a
// read-only root, where the workspace must be a volume, which the engine
// would fill with a copy of the image's tree.
func (m *Manager) workspaces(local bool) WorkspaceImages {
	if !local || m.cfg.Workspaces == nil || m.cfg.ReadOnlyRoot || m.cfg.Git == nil {
		return nil
	}
	return m.cfg.Workspaces
}

// poolSealed says whether a pool's sandboxes stay on no network for good:
// with a SandboxNet their sockets, served in the pool's directory, replace
// any network (a pool runs on one engine only, where Net's sandboxes are
// sealed, applyNet).
func (m *Manager) poolSealed() bool { return m.cfg.Net != nil }

// claimWarm gives c a sandbox of the warm pool when one fits spec; false
// when c must be created.
func (sw *swarm) claimWarm(ctx context.Context, c *ctr, spec engine.Spec) (bool, error) {
	pool := sw.m.cfg.Warm
	if pool == nil {
		return false, nil
	}
	if sw.m.poolSealed() {
		// It stays on no network, as a created one is.
		spec.Network, spec.Sealed = engine.NetworkNone, true
	}
	info, ok, err := pool.Claim(ctx, spec)
	if err != nil || !ok {
		return false, err
	}
	sw.mu.Lock()
	c.id, c.fresh, c.warm, c.claimed = info.ID, true, true, &info
	c.claimEnv, c.claimMounts = spec.Env, spec.Mounts
	sw.mu.Unlock()
	return true, nil
}

// confirmWarm tells the pool which of cs, just saved in the state file,
// are claimed sandboxes.
func (sw *swarm) confirmWarm(cs []*ctr) {
	pool := sw.m.cfg.Warm
	if pool == nil {
		return
	}
	var ids []string
	sw.mu.Lock()
	for _, c := range cs {
		if c.warm {
			ids = append(ids, c.id)
		}
	}
	sw.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := pool.Confirm(ids...); err != nil {
		// The state file holds them: a restart completes the claims.
		sw.m.log.Warn("warm pool: confirm claims", "swarm", sw.id, "err", err)
	}
}

// claimOf is a claimed sandbox's claim lines: the environment and the
// bind-mounted files a created container has from its create. After a
// restart they are made again (new grants: the sandbox never got the old
// tokens). The runner skips a repeated claim, so one written twice is
// harmless.
func (sw *swarm) claimOf(ctx context.Context, c *ctr) ([][]byte, error) {
	sw.mu.Lock()
	env, mounts := c.claimEnv, c.claimMounts
	sw.mu.Unlock()
	if env == nil {
		spec, err := sw.regrant(ctx, c)
		if err != nil {
			return nil, err
		}
		env, mounts = spec.Env, spec.Mounts
	}
	// Without a network: what the runner forwards to which socket, and the
	// proxy. The sockets are served in the pool's directory from here on
	// (after the state file's save: nothing answers there before).
	ng, err := sw.openNet(ctx, c)
	if err != nil {
		return nil, err
	}
	if ng != nil {
		env = append(slices.Clip(env), ng.Env...)
	}
	lines, err := claimLines(env, mounts)
	if err != nil {
		return nil, fmt.Errorf("the claim of %s: %w", c.name, err)
	}
	sw.mu.Lock()
	c.claimEnv, c.claimMounts = nil, nil // secrets are not kept longer than needed
	sw.mu.Unlock()
	return lines, nil
}

// writeLines writes lines to c's stdin in order: through one attach when
// the engine can (engine.Handover; a claim's lines and the task-request
// sent through attaches of their own reached the runner interleaved),
// else one attach each.
func (sw *swarm) writeLines(ctx context.Context, c *ctr, lines [][]byte) error {
	if h, ok := sw.m.eng.(interface {
		WriteStdinLines(ctx context.Context, id string, lines [][]byte) error
	}); ok {
		return h.WriteStdinLines(ctx, sw.idOf(c), lines)
	}
	for _, line := range lines {
		if err := sw.m.eng.WriteStdin(ctx, sw.idOf(c), line); err != nil {
			return err
		}
	}
	return nil
}

// regrant is c's spec with new git and model grants (what createAs gives).
func (sw *swarm) regrant(ctx context.Context, c *ctr) (engine.Spec, error) {
	var g *Grant
	var mg *ModelGrant
	if sw.local {
		gr, err := sw.m.cfg.Git.Grant(ctx, sw.branchOf(c), sw.gatewayIP())
		if err != nil {
			return engine.Spec{}, fmt.Errorf("grant git access to %s: %w", c.name, err)
		}
		g = &gr
	}
	if sw.m.cfg.Models != nil {
		gr, err := sw.m.cfg.Models.Grant(sw.sandbox(c), sw.modelGateway())
		if err != nil {
			return engine.Spec{}, fmt.Errorf("grant model access to %s: %w", c.name, err)
		}
		mg = &gr
	}
	return sw.createSpec(c, g, mg), nil
}

// claimChunk is how much of a file one claim line carries: with JSON's
// escapes (a PEM's newlines) it stays under a line's bound.
const claimChunk = 48 << 10

// claimLines are the claim lines of env and the files of mounts.
func claimLines(env []string, mounts []engine.Mount) ([][]byte, error) {
	cur := contract.WarmClaim{Env: env}
	var claims []contract.WarmClaim
	total := 0
	for _, m := range mounts {
		b, err := os.ReadFile(m.Source)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", m.Source, err)
		}
		if total += len(b); total > contract.MaxWarmClaimFiles {
			return nil, fmt.Errorf("its files are over %d bytes", contract.MaxWarmClaimFiles)
		}
		for len(b) > 0 {
			n := min(len(b), claimChunk)
			cur.Files = append(cur.Files, contract.WarmFile{Path: m.Target, Data: string(b[:n])})
			b = b[n:]
			if len(b) > 0 {
				cur.More = true
				claims = append(claims, cur)
				cur = contract.WarmClaim{}
			}
		}
	}
	claims = append(claims, cur)
	lines := make([][]byte, 0, len(claims))
	for _, cl := range claims {
		line, err := json.Marshal(cl)
		if err != nil {
			return nil, err
		}
		if len(line) > contract.MaxWarmClaimBytes {
			return nil, fmt.Errorf("a claim line is %d bytes, more than %d: agent.env is too large for a warm sandbox (set sandbox.warm_pool to 0)", len(line), contract.MaxWarmClaimBytes)
		}
		lines = append(lines, line)
	}
	if len(lines) > contract.MaxWarmClaimLines {
		return nil, fmt.Errorf("%d claim lines, more than %d", len(lines), contract.MaxWarmClaimLines)
	}
	return lines, nil
}
