package aimid

import (
	"log/slog"
	"syscall"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/gitserve"
)

// raiseFileLimit raises the soft limit of open files to the hard one (Go's
// runtime does so at start too; this says it and reports a failure) and
// returns the limit in force.
func raiseFileLimit(log *slog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open files limit; the git service keeps its default bounds", "err", err)
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open files limit to the hard limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	log.Info("open files limit", "soft", lim.Cur, "hard", lim.Max)
	return lim.Cur
}

// gitLimits are the git service's bounds: the push and mirror limits of
// the config, and connections and git processes fitted into half of the
// open files limit. The other half is the daemon's reserve for its own
// work (its socket, the engine's streams, journals, state), which no
// sandbox can take however it floods the git service.
func gitLimits(cfg *configs.Config, nofile uint64, log *slog.Logger) gitserve.Limits {
	l := gitserve.Limits{MaxPush: cfg.Git.MaxPush, MaxMirror: cfg.Git.MaxMirror, MaxWorkspace: cfg.Git.MaxWorkspace}
	if cfg.Engine.Backend == configs.BackendDocker {
		// Every sandbox's connections reach the service from the loopback
		// (through its own socket, which bounds them per sandbox).
		l.MaxConnsPerPeer = gitserve.DefaultMaxConns
	}
	if nofile == 0 {
		return l
	}
	budget := int(min(nofile/2, 1<<20))
	l.MaxBackends = min(gitserve.DefaultMaxBackends, max(2, budget/(2*gitserve.FDsPerBackend)))
	l.MaxConns = min(gitserve.DefaultMaxConns, max(8, budget-l.MaxBackends*gitserve.FDsPerBackend))
	log.Info("open files of the git service", "limit", nofile, "gitService", l.FileDescriptors(), "reserve", int(nofile)-l.FileDescriptors())
	return l
}
