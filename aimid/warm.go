package aimid

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/sandboxnet"
	"github.com/aimi-tools/swarm/warmpool"
)

// daemonLabels are what every container and network of this daemon
// carries (its instance).
func daemonLabels(o Options) map[string]string {
	return map[string]string{contract.LabelDaemon: o.Instance}
}

// PoolSocketRoot is where pool sandboxes' socket directories are: under
// the sandboxes' socket directory (sandboxnet serves only there).
func PoolSocketRoot(dataDir string) string {
	return filepath.Join(sandboxnet.Dir(dataDir), "warm")
}

// openPool makes the warm pool of the docker backend and settles the
// claims a previous daemon left (before anything adopts a swarm); nil on
// the swarm backend, where a service cannot be handed a new task
// (docs/warm-pool.md). With --drain-pool it drains the pool instead and
// returns nil.
func openPool(ctx context.Context, cfg *configs.Config, o Options, be backend, log *slog.Logger) (*warmpool.Pool, error) {
	if o.DrainPool {
		var pool *warmpool.Pool
		if be.docker != nil {
			p, err := warmpool.New(be.docker, warmpool.Options{Dir: filepath.Join(o.DataDir, "pool"), Labels: daemonLabels(o), SocketRoot: PoolSocketRoot(o.DataDir), Logger: log})
			if err != nil {
				return nil, err
			}
			pool = p
		}
		return nil, drainPool(ctx, pool, log)
	}
	if be.docker == nil {
		if cfg.Sandbox.WarmPool > 0 {
			log.Warn("sandbox.warm_pool applies to the docker backend only; every Swarm mode sandbox is a new service", "warmPool", cfg.Sandbox.WarmPool)
		}
		return nil, nil
	}
	pool, err := warmpool.New(be.docker, warmpool.Options{
		Dir: filepath.Join(o.DataDir, "pool"), Labels: daemonLabels(o), MaxAge: cfg.Sandbox.WarmMaxAge, Logger: log,
		SocketRoot: PoolSocketRoot(o.DataDir),
	})
	if err != nil {
		return nil, err
	}
	if err := pool.Reconcile(ctx); err != nil {
		return nil, err
	}
	return pool, nil
}

// drainPool is aimid --drain-pool: every waiting pool sandbox is removed
// (claimed ones are swarm containers and stay), then aimid exits.
func drainPool(ctx context.Context, pool *warmpool.Pool, log *slog.Logger) error {
	if pool == nil {
		return fmt.Errorf("--drain-pool: the warm pool is a docker backend feature; engine.backend has none")
	}
	n, err := pool.Drain(ctx)
	if err != nil {
		return fmt.Errorf("--drain-pool: %w", err)
	}
	log.Info("warm pool drained", "removed", n)
	return nil
}

// warmRepo tells the pool a repository's sandbox.warm_pool (and image:
// its workspace image when it has one, in local git mode) at each of its
// starts; nil without a pool.
func warmRepo(pool *warmpool.Pool, mgr *orchestrator.Manager, ws orchestrator.WorkspaceImages) func(req *api.StartRequest, rc *configs.Config) {
	if pool == nil {
		return nil
	}
	return func(req *api.StartRequest, rc *configs.Config) {
		image := req.Image
		if ws != nil && req.Local {
			if img, _, ok := ws.Image(context.Background(), req.RepoPath, image); ok {
				image = img
			}
		}
		pool.SetRepo(req.RepoPath, mgr.WarmSpec(image), rc.Sandbox.WarmPool)
	}
}

// startManager makes the Manager (on the pool's overlay of the engine,
// when there is a pool: claimed sandboxes look like created containers to
// it), adopts the swarms of the engine, calls made (the workspace images
// adopted are handed to the pool: its first pass keeps their sandboxes),
// then lets the pool fill.
func startManager(ctx, life context.Context, oc orchestrator.Config, eng engine.Engine, pool *warmpool.Pool, cfg *configs.Config, made func(*orchestrator.Manager)) (*orchestrator.Manager, error) {
	if pool != nil {
		oc.Warm, eng = pool, pool.Overlay()
	}
	mgr, err := orchestrator.New(life, oc, eng)
	if err != nil {
		return nil, err
	}
	if err := mgr.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover swarms: %w", err)
	}
	made(mgr)
	if pool != nil {
		pool.SetTarget(mgr.WarmSpec(cfg.Sandbox.Image), cfg.Sandbox.WarmPool)
		go pool.Run(life)
	}
	return mgr, nil
}
