package orchestrator

import (
	"context"
	"errors"
	"sync"
)

// startSetup is what a start makes while it reads the task files: the
// swarm's network (in local mode with the git service's listener on its
// gateway) and, in local mode, the git service's copy of the repository
// (GitAccess.Prepare). Each is an engine round trip or a few git
// processes, and the first container's grant waited for both in turn.
type startSetup struct {
	sw   *swarm
	net  func() error
	repo func() error // Prepare's answer (nil at once outside local mode)
}

// beginSetup starts both in the background.
func (sw *swarm) beginSetup(ctx context.Context) *startSetup {
	s := &startSetup{sw: sw, net: background(func() error { return sw.ensureNetwork(ctx) }),
		repo: func() error { return nil }}
	if sw.local {
		s.repo = background(func() error { return sw.m.cfg.Git.Prepare(ctx, sw.repo, sw.id) })
	}
	return s
}

// background runs f at once; the returned func waits for its result (any
// number of times).
func background(f func() error) func() error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return sync.OnceValue(func() error { return <-ch })
}

// wait returns once both are done, with their errors.
func (s *startSetup) wait() error {
	return errors.Join(s.net(), s.repo())
}

// undo removes what a refused start made: the network once nothing uses
// it, and the git service's copy of the repository.
func (s *startSetup) undo(ctx context.Context) {
	sw := s.sw
	ctx = context.WithoutCancel(ctx)
	if s.net() == nil {
		if err := sw.m.eng.RemoveNetworkIfUnused(ctx, sw.network); err != nil {
			sw.m.log.Warn("the network of a refused start stays", "network", sw.network, "err", err)
		}
	}
	if sw.local {
		_ = s.repo()
		if err := sw.m.cfg.Git.Forget(ctx, sw.id); err != nil {
			sw.m.log.Warn("the git service's copy of a refused start's repository stays", "swarm", sw.id, "err", err)
		}
	}
}
