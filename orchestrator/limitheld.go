package orchestrator

import (
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// LimitHolder is a ModelAccess that knows how long provider limits held a
// container's model calls (the model gateway: its runner waits for a
// limit's reset before it retries the story). It is optional, found by a
// type assertion: the daemon asserts at compile time that its ModelAccess
// has it, so a change of signature cannot drop it silently.
type LimitHolder interface {
	LimitHeld(sb contract.Sandbox) time.Duration
}

// putOffTimeout re-arms the container's timeout when provider limits held
// it: the time they held it does not count, so a limit that resets hours
// later pauses the container instead of ending it. False when the
// timeout stands.
func (f *follower) putOffTimeout() bool {
	h, ok := f.sw.m.cfg.Models.(LimitHolder)
	if !ok {
		return false
	}
	held := h.LimitHeld(f.sw.sandbox(f.c))
	deadline := f.started.Add(f.sw.m.cfg.Timeout + held)
	left := time.Until(deadline)
	if held <= 0 || left <= 0 {
		return false
	}
	f.log.Info("timeout put off: provider limits held the container's model calls", "timeout", f.sw.m.cfg.Timeout, "held", held.Round(time.Second), "until", deadline)
	f.timer.Reset(left)
	return true
}
