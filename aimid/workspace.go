package aimid

import (
	"context"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/warmpool"
	"github.com/aimi-tools/swarm/workspace"
)

// workspaceSweep is how often images no repository holds are looked at
// again (the engine refuses to remove one while a sandbox of it lives).
const workspaceSweep = 30 * time.Second

// openWorkspaces starts the workspace images (docs/workspaces.md) where
// they work: the docker backend with the local git service and a writable
// root. Elsewhere it says once why not and returns nil (sandboxes get
// their workspace as before). mgr is filled in once the Manager exists
// (the pool's sandboxes of an image take its spec); announce, called
// then, hands the images adopted from the previous daemon to the pool.
func openWorkspaces(ctx, life context.Context, cfg *configs.Config, o Options, be backend, git *gitserve.Service, pool *warmpool.Pool, mgr **orchestrator.Manager, log *slog.Logger) (ws orchestrator.WorkspaceImages, announce, closeAll func()) {
	none := func() {}
	switch {
	case git == nil:
		return nil, none, none // no local git service: every workspace is a clone of origin
	case be.docker == nil:
		log.Info("workspace images are not used: Swarm mode nodes share no image store; each sandbox gets its workspace as before")
		return nil, none, none
	case cfg.Sandbox.ReadOnlyRoot:
		log.Info("workspace images are not used: with sandbox.read_only_root the workspace is a volume, which the engine fills with a copy of the image's tree; each sandbox gets its workspace as before")
		return nil, none, none
	}
	opts := workspace.Options{Labels: daemonLabels(o), MaxRepos: cfg.Sandbox.WarmPoolRepos, Logger: log}
	if pool != nil {
		opts.Quiet = pool.WaitQuiet
		opts.Ready = func(repo, image string) {
			if *mgr != nil {
				pool.SetRepoImage(repo, (*mgr).WarmSpec(image), cfg.Sandbox.WarmPool)
			}
		}
		opts.Gone = func(_, image string) { pool.DropImage(image) }
	}
	m := workspace.New(be.docker, opts)
	m.Cleanup(ctx)
	go m.Run(life, workspaceSweep)
	return wsImages{m: m, git: git}, m.Announce, func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.Close(cctx)
	}
}

// wsImages is the Manager's view of the workspace images: a repository's
// tree is the git service's ready-made workspace of its default branch.
type wsImages struct {
	m   *workspace.Manager
	git *gitserve.Service
}

func (w wsImages) Image(ctx context.Context, repo, base string) (string, string, bool) {
	return w.m.Image(ctx, repo, base)
}

func (w wsImages) Refresh(repo, base, swarmID string) {
	w.m.Prepare(repo, base, func(ctx context.Context) (workspace.Tree, error) {
		f, tip, err := w.git.DefaultWorkspace(ctx, swarmID)
		if err != nil {
			return workspace.Tree{}, err
		}
		return workspace.Tree{Commit: tip, Tar: f}, nil
	}, func(ctx context.Context, commit string) (workspace.Diff, error) {
		d, err := w.git.DefaultDeltaSize(ctx, swarmID, commit)
		return workspace.Diff{Tip: d.Tip, Descends: d.Descends, Paths: d.Paths, Bytes: d.Bytes}, err
	})
}
