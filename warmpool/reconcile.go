package warmpool

import (
	"context"
	"errors"
	"fmt"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// Reconcile settles the claims a previous daemon left, before anything
// else uses the engine (the daemon's start, before the orchestrator's
// Recover): a claim whose container is gone is forgotten; one its swarm's
// state file holds is complete; a claim that was still being made when the
// daemon died goes back to the pool (it was sent nothing: the claim line
// follows the state file's save). A confirmed claim the state file lost is
// left as a swarm container, as a created one would be.
func (p *Pool) Reconcile(ctx context.Context) error {
	var gone, done []string
	for id, cl := range p.claims.all() {
		info, err := p.eng.Inspect(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			gone = append(gone, id)
			continue
		}
		if err != nil {
			return fmt.Errorf("warm pool: reconcile the claims: %w", err)
		}
		if cl.Phase == phaseClaimed {
			continue
		}
		if inState(ctx, cl.Labels[contract.LabelProject], info.ID) {
			done = append(done, info.ID)
			continue
		}
		p.unclaim(ctx, info.ID, cl)
	}
	if err := p.claims.drop(gone...); err != nil {
		return err
	}
	if len(done) > 0 {
		p.log.Info("warm pool: claims completed after a restart", "containers", len(done))
		return p.Confirm(done...)
	}
	return nil
}

// inState reports whether repo's state file holds container id.
func inState(ctx context.Context, repo, id string) bool {
	if api.CheckRepoPath(repo) != nil {
		return false
	}
	st, err := state.Open(repo).Load(ctx)
	if err != nil {
		return false
	}
	for _, c := range st.Containers {
		if c.ContainerID == id {
			return true
		}
	}
	return false
}

// Drain removes every sandbox waiting in the pool (aimid --drain-pool, or
// sandbox.warm_pool set to 0): claimed ones are swarm containers and stay.
// Half-claimed ones are settled first (Reconcile).
func (p *Pool) Drain(ctx context.Context) (removed int, err error) {
	if err := p.Reconcile(ctx); err != nil {
		return 0, err
	}
	infos, err := p.eng.List(ctx, p.poolLabels(nil))
	if err != nil {
		return 0, fmt.Errorf("warm pool: list its sandboxes: %w", err)
	}
	for _, in := range infos {
		if p.Claimed(in.ID) {
			continue
		}
		if err := p.eng.Remove(ctx, in.ID); err != nil {
			return removed, fmt.Errorf("warm pool: remove %s: %w", in.Name, err)
		}
		p.removeDir(in.Name)
		removed++
	}
	return removed, nil
}
