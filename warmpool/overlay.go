package warmpool

import (
	"context"
	"maps"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Engine is what the pool needs of the single Docker engine
// (*container.Docker): what the orchestrator drives, its events, and the
// hand-over of a running sandbox to a swarm.
type Engine interface {
	engine.Engine
	engine.EventSource
	engine.Handover
}

var _ Engine = (*container.Docker)(nil)

// Overlay is the engine the orchestrator gets when a pool runs: a claimed
// sandbox shows the labels (and network) its claim recorded, so every
// lookup by label finds it as it finds a created container, and pool
// sandboxes waiting for a claim are hidden (no swarm may touch them:
// cleanup never removes one). Everything else goes to the engine as is.
type Overlay struct {
	Engine
	p *Pool
}

// Overlay returns the pool's view of its engine for the orchestrator.
func (p *Pool) Overlay() *Overlay { return &Overlay{Engine: p.eng, p: p} }

// Inspect is the engine's, with a claimed sandbox's recorded labels.
func (o *Overlay) Inspect(ctx context.Context, id string) (engine.Info, error) {
	info, err := o.Engine.Inspect(ctx, id)
	if err != nil {
		return info, err
	}
	return o.p.dress(info), nil
}

// List is the engine's, without pool sandboxes waiting for a claim, and
// with the claimed ones whose recorded labels match.
func (o *Overlay) List(ctx context.Context, labels map[string]string) ([]engine.Info, error) {
	infos, err := o.Engine.List(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := infos[:0]
	for _, in := range infos {
		if in.Labels[contract.LabelWarm] == "" {
			out = append(out, in)
		}
	}
	if o.p.claims.len() == 0 {
		return out, nil
	}
	warm, err := o.Engine.List(ctx, o.p.poolLabels(nil))
	if err != nil {
		return nil, err
	}
	for _, in := range warm {
		if _, ok := o.p.claims.get(in.ID); !ok {
			continue
		}
		in = o.p.dress(in)
		if contract.CheckLabels(in.Labels, labels) == nil {
			out = append(out, in)
		}
	}
	return out, nil
}

// Remove removes the container and forgets its claim.
func (o *Overlay) Remove(ctx context.Context, id string) error {
	if _, ok := o.p.claims.get(id); !ok && o.p.claims.len() > 0 {
		if info, err := o.Engine.Inspect(ctx, id); err == nil {
			id = info.ID // a name or short id: the record is by full id
		}
	}
	if err := o.Engine.Remove(ctx, id); err != nil {
		return err
	}
	if err := o.p.claims.drop(id); err != nil {
		o.p.log.Warn("warm pool: forget the claim of a removed container (the next start forgets it)", "container", id, "err", err)
	}
	return nil
}

// dress gives a claimed sandbox's info its recorded labels and network,
// and its claim as its start: the time it waited in the pool is no
// swarm's (its time limit and the newest swarm of a repository whose
// state file is gone go by the start).
func (p *Pool) dress(info engine.Info) engine.Info {
	cl, ok := p.claims.get(info.ID)
	if !ok {
		return info
	}
	labels := maps.Clone(cl.Labels)
	labels[contract.LabelWarm] = cl.Phase
	info.Labels = labels
	// The engine keeps the create's network mode ("none"); the sandbox is
	// on its swarm's network, as a created container would be.
	info.NetworkMode = cl.Network
	if cl.ClaimedAt.After(info.StartedAt) {
		info.StartedAt = cl.ClaimedAt
	}
	return info
}
