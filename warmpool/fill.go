package warmpool

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Run keeps the pool until ctx ends: at every kick (a claim, the end of a
// start, a new target) and every poll it replaces the sandboxes that died,
// aged out or no longer match their target, then creates the missing
// ones, one at a time and never while a start runs.
func (p *Pool) Run(ctx context.Context) {
	p.mu.Lock()
	poll := min(max(p.maxAge/4, minPoll), maxPoll)
	p.mu.Unlock()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if wait := p.settle(); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		p.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// settle is how long to wait before the pool may touch the engine: while a
// start runs, and refillDelay after the last one ended.
func (p *Pool) settle() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy > 0 {
		return minPoll
	}
	return time.Until(p.quiet.Add(refillDelay))
}

// pass looks at every pool sandbox once and tops the pool up.
func (p *Pool) pass(ctx context.Context) {
	infos, err := p.eng.List(ctx, p.poolLabels(nil))
	if err != nil {
		p.log.Warn("warm pool: list its sandboxes", "err", err)
		return
	}
	p.mu.Lock()
	want := map[string]int{}
	specs := map[string]engine.Spec{}
	for k, t := range p.targets {
		want[k], specs[k] = t.want(), t.spec
	}
	taking := map[string]bool{}
	for id := range p.taking {
		taking[id] = true
	}
	maxAge := p.maxAge
	p.mu.Unlock()
	images := map[string]string{}
	for k, s := range specs {
		if want[k] == 0 {
			continue
		}
		id, err := p.eng.ImageID(ctx, s.Image)
		if err != nil {
			// Not knowing the image is no reason to think it changed: a
			// daemon stopping mid-pass discarded its whole pool so.
			if ctx.Err() == nil {
				p.log.Warn("warm pool: look up its image; the pool waits for the next pass", "image", s.Image, "err", err)
			}
			return
		}
		images[k] = id
		if p.imageMissing(s.Image, id == "") {
			want[k] = 0
		}
	}
	idle := map[string][]string{}
	for _, in := range infos {
		if taking[in.ID] || p.Claimed(in.ID) {
			continue
		}
		k := in.Labels[contract.LabelWarmKey]
		if why := p.stale(in, want[k], images[k], maxAge); why != "" {
			p.discard(ctx, in.ID, why)
			continue
		}
		idle[k] = append(idle[k], in.ID)
	}
	p.mu.Lock()
	for k, ids := range idle {
		// Claims picked meanwhile are not in the listing's answer twice:
		// only ids still free are kept.
		p.idle[k] = p.keepFree(ids)
	}
	for k := range p.idle {
		if _, ok := idle[k]; !ok {
			delete(p.idle, k)
		}
	}
	p.mu.Unlock()
	p.sweepDirs(infos)
	for k, n := range want {
		p.topUp(ctx, k, specs[k], n)
	}
}

// imageMissing says once that image is gone and is missing: a create of
// it fails every time, so its pool waits for it or for a new target
// instead of trying at every pass. Sandboxes of an image keep it, so
// none waits of a missing one.
func (p *Pool) imageMissing(image string, missing bool) bool {
	p.mu.Lock()
	said := p.missing[image]
	if missing {
		p.missing[image] = true
	} else {
		delete(p.missing, image)
	}
	p.mu.Unlock()
	if missing && !said {
		p.log.Warn("warm pool: its image is gone; no sandbox is made of it until it is back (make sandbox-image) or a start sets another",
			"image", image)
	}
	return missing
}

// keepFree drops the ids a claim took meanwhile (p.mu held).
func (p *Pool) keepFree(ids []string) []string {
	out := ids[:0]
	for _, id := range ids {
		if !p.taking[id] {
			if _, ok := p.claims.get(id); !ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// stale says why a pool sandbox must go ("" when it may wait on).
func (p *Pool) stale(in engine.Info, want int, imageID string, maxAge time.Duration) string {
	switch {
	case want == 0:
		return "no pool wants its settings (sandbox.warm_pool is 0, or its image or sandbox settings changed)"
	case imageID == "" || in.ImageID != imageID:
		return "its image changed"
	case !in.Running:
		p.log.Warn("warm pool: a pool sandbox died; replacing it", "sandbox", in.Name, "status", in.Status, "exitCode", in.ExitCode, "error", in.Error)
		return "it died"
	case time.Since(in.StartedAt) > maxAge:
		return "it waited longer than sandbox.warm_max_age"
	}
	return ""
}

// topUp creates sandboxes of key until n wait, or a start begins.
func (p *Pool) topUp(ctx context.Context, key string, spec engine.Spec, n int) {
	for ctx.Err() == nil {
		p.mu.Lock()
		have, busy := len(p.idle[key]), p.busy > 0
		p.mu.Unlock()
		if have >= n || busy {
			return
		}
		id, err := p.fill(ctx, key, spec)
		if err != nil {
			p.log.Warn("warm pool: create a sandbox", "image", spec.Image, "err", err)
			return
		}
		p.mu.Lock()
		p.idle[key] = append(p.idle[key], id)
		p.mu.Unlock()
	}
}

// fill creates and starts one pool sandbox of spec: the spec's settings,
// no network, no name of a task, and nothing of the environment but
// contract.EnvWarm (secrets come with the claim).
func (p *Pool) fill(ctx context.Context, key string, spec engine.Spec) (string, error) {
	s := spec
	s.Name = newName()
	s.Labels = p.poolLabels(map[string]string{contract.LabelWarmKey: key})
	s.Env = []string{contract.EnvWarm + "=1"}
	s.Network = engine.NetworkNone
	s.Mounts = nil
	if err := p.mountDir(&s); err != nil {
		return "", err
	}
	id, err := p.eng.Create(ctx, s)
	if err != nil {
		p.removeDir(s.Name)
		return "", err
	}
	// A start that began during the create goes first: the engine's
	// start of a sandbox (runtime, mounts) would take the cores and the
	// engine from the start's own containers.
	p.waitNotBusy(ctx)
	if err := p.eng.Start(ctx, id); err != nil {
		p.discard(ctx, id, "its start failed")
		p.removeDir(s.Name)
		return "", err
	}
	p.log.Debug("warm pool: sandbox ready", "sandbox", s.Name, "image", s.Image)
	return id, nil
}

// notBusyPoll is how often a created pool sandbox looks whether the start
// that holds it back is over.
const notBusyPoll = 50 * time.Millisecond

// waitNotBusy returns once no start holds the pool's creates back (Busy),
// or ctx ended.
func (p *Pool) waitNotBusy(ctx context.Context) {
	t := time.NewTicker(notBusyPoll)
	defer t.Stop()
	for {
		p.mu.Lock()
		busy := p.busy > 0
		p.mu.Unlock()
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
