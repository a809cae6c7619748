package aimid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/swarmmode"
)

// backend is the engine the orchestrator drives, chosen by engine.backend.
type backend struct {
	eng   engine.Engine
	probe gitserve.TipProbe // nil when the engine cannot read a sandbox's files
	trees gitserve.ContainerTrees
	// checkDisk says whether containers of an image can get a writable-layer
	// limit (container.ErrDiskLimitUnsupported when not).
	checkDisk func(ctx context.Context, image string, labels map[string]string) error
	close     func() error
	// docker is the single Docker engine (nil on the swarm backend): the
	// warm pool's.
	docker *container.Docker
}

// SealedHostsFile is the sealed sandboxes' /etc/hosts in the data dir
// (container.WithSealedHosts).
const SealedHostsFile = "sandbox-hosts"

// openBackend connects to the engine.backend at engine.host (DOCKER_HOST
// and friends when empty). An engine that does not answer, or a swarm
// backend whose endpoint is not a manager of an active swarm, stops the
// daemon with the key and the fix.
func openBackend(ctx context.Context, cfg *configs.Config, o Options, log *slog.Logger, wrap func(http.RoundTripper) http.RoundTripper) (backend, error) {
	instance := o.Instance
	if cfg.Engine.Host != "" {
		// Every engine client of this process (the backend, the instance
		// marker) follows the Docker client's conventions, DOCKER_HOST
		// first; engine.host sets it for all of them at once.
		if err := os.Setenv("DOCKER_HOST", cfg.Engine.Host); err != nil {
			return backend{}, fmt.Errorf("engine.host: %w", err)
		}
	}
	switch cfg.Engine.Backend {
	case configs.BackendSwarm:
		cli, wrapped, err := container.NewClient(wrap)
		if err != nil {
			return backend{}, fmt.Errorf("engine.host / DOCKER_HOST: %w", err)
		}
		if wrap != nil && !wrapped {
			log.Warn("engine requests are not counted: the engine endpoint is not a unix socket or plain TCP")
		}
		if _, err := cli.Ping(ctx); err != nil {
			cli.Close()
			return backend{}, fmt.Errorf("engine.backend is swarm but no engine answers at %s: %w (set engine.host to a Swarm mode manager's endpoint, or DOCKER_HOST)", cli.DaemonHost(), err)
		}
		cli.NegotiateAPIVersion(ctx)
		eng, err := swarmmode.New(ctx, cli, swarmmode.Options{HostAddr: cfg.Git.Address, StopGrace: cfg.Swarm.StopGrace, Logger: log, Instance: instance, NodeHost: cfg.Engine.NodeHost})
		if err != nil {
			cli.Close()
			return backend{}, fmt.Errorf("engine.backend is swarm: %w", err)
		}
		log.Info("engine: Swarm mode cluster", "manager", cli.DaemonHost(), "gitAddress", cfg.Git.Address)
		noDiskLimit := func(context.Context, string, map[string]string) error {
			return fmt.Errorf("%w: Swarm mode services take no storage options", engine.ErrDiskLimitUnsupported)
		}
		return backend{eng: eng, checkDisk: noDiskLimit, close: cli.Close}, nil
	default:
		hosts, err := filepath.Abs(filepath.Join(o.DataDir, SealedHostsFile))
		if err != nil {
			return backend{}, fmt.Errorf("--data-dir: %w", err)
		}
		docker, err := container.NewDocker(ctx, container.WithLogger(log), container.WithTransport(wrap),
			container.WithOwner(map[string]string{contract.LabelDaemon: instance}), container.WithSealedHosts(hosts))
		if err != nil {
			return backend{}, err
		}
		return backend{eng: docker, docker: docker, probe: gitserve.EngineProbe{Files: docker}, trees: docker, checkDisk: docker.CheckDiskLimit, close: docker.Close}, nil
	}
}

// diskLimit is the writable-layer limit the orchestrator gets: sandbox.disk
// when the engine can enforce it, else 0 with a warning saying why (every
// create would fail otherwise). When the engine cannot be asked (the image
// is not built yet, say), the limit stays and a create the engine refuses
// says why.
func diskLimit(ctx context.Context, cfg *configs.Config, be backend, labels map[string]string, log *slog.Logger) int64 {
	want := cfg.Sandbox.DiskBytes
	if want <= 0 {
		return 0
	}
	err := be.checkDisk(ctx, cfg.Sandbox.Image, labels)
	switch {
	case err == nil:
		log.Info("sandbox.disk: each container's writable layer is limited", "bytes", want)
		return want
	case errors.Is(err, engine.ErrDiskLimitUnsupported):
		log.Warn("sandbox.disk is not enforced: the engine cannot limit a container's writable layer; containers run without a disk limit", "bytes", want, "why", err.Error())
		return 0
	default:
		log.Warn("sandbox.disk: could not check whether the engine can limit the writable layer; containers get the limit", "bytes", want, "err", err)
		return want
	}
}

// checkRuntime stops the daemon when the engine has sandbox.runtime but
// registered in a way that cannot run the sandboxes (gVisor's runsc
// without the arguments they need), before any swarm fails on it. sealed
// says the sandboxes have no network and reach the daemon through sockets.
// An engine that cannot be asked only gets a warning.
func checkRuntime(ctx context.Context, cfg *configs.Config, be backend, sealed bool, log *slog.Logger) error {
	if be.docker == nil || cfg.Sandbox.Runtime == "" {
		return nil
	}
	err := be.docker.CheckRuntime(ctx, cfg.Sandbox.Runtime, sealed)
	var infoErr *container.EngineInfoError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &infoErr):
		log.Warn("sandbox.runtime: could not read the engine's runtimes", "runtime", cfg.Sandbox.Runtime, "err", err)
		return nil
	default:
		return fmt.Errorf("sandbox.runtime %q: %w", cfg.Sandbox.Runtime, err)
	}
}
