package orchestrator

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// foreignPoll is how often the daemon looks at the state files of the
// swarms it holds for a stop another tool wrote there. A stat per swarm per
// poll; the file is read only when it changed.
const foreignPoll = time.Second

// fileStamp tells whether a state file changed since the last look.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	dir  bool
}

func stampOf(path string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	s := fileStamp{mod: fi.ModTime(), size: fi.Size(), dir: fi.IsDir()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s, true
}

// watchForeignStops honours `stopped` written into the state file by
// another tool (the aimi shell tool's swarm-update) on a container the
// daemon has pending or running: it stops that container as `aimi swarm
// stop NAME` would. It runs until ctx ends.
func (m *Manager) watchForeignStops(ctx context.Context) {
	seen := map[string]fileStamp{}
	t := time.NewTicker(foreignPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.beat.beat()
		m.mu.Lock()
		sws := make([]*swarm, 0, len(m.swarms))
		for _, sw := range m.swarms {
			sws = append(sws, sw)
		}
		m.mu.Unlock()
		for _, sw := range sws {
			stamp, ok := stampOf(sw.store.Path())
			if !ok || seen[sw.repo] == stamp {
				continue
			}
			seen[sw.repo] = stamp
			if names := sw.foreignStops(ctx); len(names) > 0 {
				m.log.Info("stop written into the state file by another tool; stopping", "swarm", sw.id, "repo", sw.repo, "containers", names)
				go m.stopForeign(ctx, sw, names)
			}
		}
	}
}

// foreignStops lists the containers the file says are stopped while the
// daemon has them pending or running and no stop was asked for yet.
func (sw *swarm) foreignStops(ctx context.Context) []string {
	// The daemon's view is taken on both sides of the file's read: a
	// resume between them (a stopped container reopened, the file
	// rewritten) made a stale "stopped" look like another tool's stop, and
	// a container that stopped itself just after the read made the daemon's
	// own "stopped" look like one. Another tool's stop holds on both sides;
	// one the two views disagree on is looked at again at the next change.
	before := sw.led.snapshot()
	file, err := sw.store.Load(ctx)
	if err != nil || file.SwarmID != sw.id {
		return nil
	}
	return foreignStopNames(before, file, sw.led.snapshot(), func(name string) bool {
		c := sw.find(name)
		if c == nil {
			return true
		}
		sw.mu.Lock()
		defer sw.mu.Unlock()
		return c.stopReq
	})
}

// foreignStopNames is the containers file says are stopped while the
// daemon's views before and after its read both have them pending or
// running, and no stop was asked for (asked).
func foreignStopNames(before, file, after *state.Swarm, asked func(name string) bool) []string {
	var names []string
	for _, fc := range file.Containers {
		if fc == nil {
			continue
		}
		b, a := before.Container(fc.ContainerName), after.Container(fc.ContainerName)
		if b == nil || a == nil || !state.ForeignStop(b, fc) || !state.ForeignStop(a, fc) || asked(fc.ContainerName) {
			continue
		}
		names = append(names, fc.ContainerName)
	}
	return names
}

// stopForeign stops the containers under the repo lock, as Stop does, if
// the swarm is still the repository's.
func (m *Manager) stopForeign(ctx context.Context, sw *swarm, names []string) {
	if m.checkOpen() != nil {
		return
	}
	unlock := m.lockRepo(sw.repo)
	defer unlock()
	if m.getSwarm(sw.repo) != sw {
		return
	}
	if err := sw.stop(ctx, names); err != nil && ctx.Err() == nil {
		m.log.Warn("stop requested in the state file", "swarm", sw.id, "containers", names, "err", err)
	}
}

// foreignActive reports whether the state file holds a pending or running
// entry another tool made (one the daemon does not follow): a start that
// replaced the file would make that tool lose its containers, so it is
// refused as a start over an active swarm is.
func (sw *swarm) foreignActive(ctx context.Context) bool {
	file, err := sw.store.Load(ctx)
	if err != nil || file.SwarmID != sw.id {
		return false
	}
	for _, fc := range file.Containers {
		if sw.find(fc.ContainerName) == nil && !fc.Status.Terminal() {
			return true
		}
	}
	return false
}
