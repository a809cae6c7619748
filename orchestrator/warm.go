package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// WarmPool hands running sandboxes to starts (package warmpool), so a start
// does not wait for the engine's create and start. nil: every container is
// created. The engine of a Manager with a pool must show claimed sandboxes
// with their claim's labels (warmpool.Overlay).
type WarmPool interface {
	// Claim renames a waiting sandbox of s's settings to s.Name and joins
	// it to s.Network; ok false (nothing done) when none fits. A name held
	// by another container is engine.ErrConflict, as from Create.
	Claim(ctx context.Context, s engine.Spec) (id string, ok bool, err error)
	// Confirm says the state file holds these claimed containers.
	Confirm(ids ...string) error
	// Busy holds the pool's own creates back until done is called.
	Busy() (done func())
}

// warmNote is the journal's note on the task-request of a claimed sandbox:
// the one place a claimed container differs from a created one.
const warmNote = "warm: a sandbox of the warm pool was claimed for this container"

// WarmSpec is the spec of a sandbox of image that a start of this Manager
// would create, without anything of a task (the pool's template).
func (m *Manager) WarmSpec(image string) engine.Spec {
	sw := &swarm{m: m, image: image, network: engine.NetworkNone}
	s := sw.createSpec(&ctr{name: "aimi-warm"}, nil)
	s.Labels, s.Env = m.selector(nil), nil
	return s
}

// claimWarm gives c a sandbox of the warm pool when one fits spec; false
// when c must be created.
func (sw *swarm) claimWarm(ctx context.Context, c *ctr, spec engine.Spec, g *Grant) (bool, error) {
	pool := sw.m.cfg.Warm
	if pool == nil {
		return false, nil
	}
	id, ok, err := pool.Claim(ctx, spec)
	if err != nil || !ok {
		return false, err
	}
	sw.mu.Lock()
	c.id, c.fresh, c.warm = id, true, true
	c.claimEnv = spec.Env
	if g != nil {
		c.caFile = g.CAFile
	}
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

// sendClaim writes a claimed sandbox's claim line: the environment and CA
// a created container has from its create. After a restart they are made
// again (a new git grant: the sandbox never got the old token). The runner
// skips a second claim line, so a claim written twice is harmless.
func (sw *swarm) sendClaim(ctx context.Context, c *ctr) error {
	sw.mu.Lock()
	env, caFile := c.claimEnv, c.caFile
	sw.mu.Unlock()
	if env == nil {
		var g *Grant
		if sw.local {
			gr, err := sw.m.cfg.Git.Grant(ctx, sw.repo, sw.id, c.name, c.branch, sw.gatewayIP())
			if err != nil {
				return fmt.Errorf("grant git access to %s: %w", c.name, err)
			}
			g, caFile = &gr, gr.CAFile
		}
		env = sw.createSpec(c, g).Env
	}
	var pem []byte
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("read the git service's CA for %s: %w", c.name, err)
		}
		pem = b
		env = withoutEnv(env, contract.EnvGitSSLCAInfo) // the runner points it at its copy
	}
	line, err := json.Marshal(contract.WarmClaim{Env: env, CAPEM: string(pem)})
	if err != nil {
		return err
	}
	if len(line) > contract.MaxWarmClaimBytes {
		return fmt.Errorf("the claim of %s is %d bytes, more than %d: agent.env is too large for a warm sandbox (set sandbox.warm_pool to 0)", c.name, len(line), contract.MaxWarmClaimBytes)
	}
	if err := sw.m.eng.WriteStdin(ctx, sw.idOf(c), append(line, '\n')); err != nil {
		return fmt.Errorf("write the claim to %s: %w", c.name, err)
	}
	sw.mu.Lock()
	c.claimEnv, c.caFile = nil, "" // secrets are not kept longer than needed
	sw.mu.Unlock()
	return nil
}

func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if len(kv) <= len(name) || kv[:len(name)+1] != name+"=" {
			out = append(out, kv)
		}
	}
	return out
}
