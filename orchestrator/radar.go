package orchestrator

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/radar"
)

// TipSource is the side of GitAccess the conflict radar reads in local
// mode: the service says when a container's branch moved, and where it is
// now. In remote mode the radar reads the daemon's copy of origin
// (radarremote.go).
type TipSource interface {
	OnTip(fn func(sb contract.Sandbox))
	Received(sb contract.Sandbox, branch string) (repo, tip string, err error)
}

// radarNice is how much lower the radar's git runs than the daemon: its
// merges must never slow a push, a story or a status.
const radarNice = 10

// radarGit is the git of the radar's merges.
var radarGit = gitcmd.Git{Env: gitcmd.Hermetic.Env, Nice: radarNice}

// swarmRadar is one swarm's conflict radar: one look at a time, on its
// own goroutine, woken by its watcher (pushes while a look runs or
// pauses coalesce into the next look; radar.Duty bounds its share).
type swarmRadar struct {
	w *radar.Watcher

	mu    sync.Mutex
	pairs []api.Conflict
}

// noteTip wakes the radar of sb's swarm (TipSource.OnTip): it returns at
// once, so a push's answer never waits for a merge.
func (m *Manager) noteTip(sb contract.Sandbox) {
	if sw := m.byID(sb.Swarm); sw != nil {
		sw.radarKick()
	}
}

func (sw *swarm) radarKick() {
	if _, ok := sw.m.cfg.Git.(TipSource); !ok && sw.local {
		return
	}
	sw.mu.Lock()
	r := sw.radar
	if r == nil {
		r = &swarmRadar{w: radar.NewWatcher()}
		sw.radar = r
		sw.m.wg.Go(func() { sw.m.runRadar(sw, r) })
	}
	sw.mu.Unlock()
	r.w.Kick()
}

// runRadar looks each time it is kicked, until the daemon stops or the
// swarm is gone.
func (m *Manager) runRadar(sw *swarm, r *swarmRadar) {
	scratch := filepath.Join(m.cfg.RadarDir, sw.id)
	var rd *radar.Radar
	r.w.Run(m.life, func(ctx context.Context) (time.Duration, bool) {
		if m.byID(sw.id) != sw {
			return 0, false
		}
		src, cpu, err := sw.radarSource(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("conflict radar: origin's branches were not read; it looks again at the next story", "swarm", sw.id, "err", err)
			}
			return cpu, true
		}
		if src == nil {
			return cpu, true
		}
		tips, repo := sw.radarTips(src)
		if repo == "" {
			return cpu, true
		}
		if rd == nil {
			rd = radar.New(radarGit, repo, scratch)
		}
		rep, err := rd.Look(ctx, sw.radarTarget(ctx, repo), tips)
		rep.CPU += cpu
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("conflict radar: the look failed; it looks again at the next push", "swarm", sw.id, "err", err)
			}
			return rep.CPU, true
		}
		r.mu.Lock()
		r.pairs = conflictsView(rep.Pairs)
		r.mu.Unlock()
		sw.publishRadar(rep)
		return rep.CPU, true
	})
}

// radarTips is every container's received tip, and the repository they
// are in ("" while none has pushed).
func (sw *swarm) radarTips(src receivedTips) (map[string]string, string) {
	sw.mu.Lock()
	type nb struct{ name, branch string }
	var all []nb
	for _, c := range sw.ctrs {
		if !land.IsLandRun(c.taskFile) { // a land's own run: not the swarm's work
			all = append(all, nb{c.name, c.branch})
		}
	}
	sw.mu.Unlock()
	tips, repo := map[string]string{}, ""
	for _, c := range all {
		r, tip, err := src.Received(contract.Sandbox{Swarm: sw.id, Container: c.name}, c.branch)
		if err == nil && tip != "" {
			tips[c.name], repo = tip, r
		}
	}
	return tips, repo
}

// radarTarget is where the swarm's branches will land: its integration
// branch once a land began it (what has landed, with land.auto the train
// that grows while the rest work), else the branch the service's
// repository's HEAD names (the user's checked-out branch when the swarm
// began), with its commit there. Empty when unknown.
func (sw *swarm) radarTarget(ctx context.Context, repo string) radar.Target {
	integration := LandBranchPrefix + sw.id[:min(8, len(sw.id))]
	if commit, err := radarGit.RevParse(ctx, repo, "refs/heads/"+integration); err == nil && commit != "" {
		return radar.Target{Name: integration, Commit: commit}
	}
	name, err := radarGit.Run(ctx, repo, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		return radar.Target{}
	}
	commit, err := radarGit.RevParse(ctx, repo, "refs/heads/"+name)
	if err != nil {
		return radar.Target{}
	}
	return radar.Target{Name: strings.TrimSpace(name), Commit: commit}
}

// publishRadar tells subscribers of every conflict that appeared or
// cleared (overlaps are only in the view).
func (sw *swarm) publishRadar(rep radar.Report) {
	for _, p := range rep.Cleared {
		if p.Kind == radar.KindConflict {
			sw.m.publish(sw.radarEvent(api.EventConflictCleared, p))
		}
	}
	for _, p := range rep.Detected {
		if p.Kind == radar.KindConflict {
			sw.m.publish(sw.radarEvent(api.EventConflictDetected, p))
		}
	}
}

func (sw *swarm) radarEvent(kind api.EventKind, p radar.Pair) api.Event {
	c := conflictView(p)
	return api.Event{SwarmID: sw.id, RepoPath: sw.repo, ContainerName: p.Containers[0], Kind: kind, Conflict: &c}
}

// radarView is the radar's last look, for the swarm's view.
func (sw *swarm) radarView() []api.Conflict {
	sw.mu.Lock()
	r := sw.radar
	sw.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Conflict(nil), r.pairs...)
}

func conflictsView(ps []radar.Pair) []api.Conflict {
	out := make([]api.Conflict, 0, len(ps))
	for _, p := range ps {
		out = append(out, conflictView(p))
	}
	return out
}

func conflictView(p radar.Pair) api.Conflict {
	return api.Conflict{Containers: append([]string(nil), p.Containers...), Onto: p.Onto,
		Files: append([]string(nil), p.Files...), Kind: string(p.Kind)}
}
