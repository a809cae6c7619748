package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// Journal streams the journal records of one container of the repo's
// swarm; with follow it goes on until the container is terminal and its
// journal fully read, or ctx ends.
func (m *Manager) Journal(ctx context.Context, repoPath, name string, follow bool) (<-chan state.Record, error) {
	repo, err := cleanRepo(repoPath)
	if err != nil {
		return nil, err
	}
	sw := m.getSwarm(repo)
	var id string
	if sw != nil {
		id = sw.id
		if sw.find(name) == nil {
			sw = nil
		}
	}
	if sw == nil {
		st, err := state.Open(repo).Load(ctx)
		if errors.Is(err, state.ErrNoState) {
			return nil, api.ErrNoSwarm
		}
		if err != nil {
			return nil, err
		}
		if st.Container(name) == nil {
			return nil, fmt.Errorf("%w: %q", api.ErrUnknownContainer, name)
		}
		id = st.SwarmID
		follow = follow && !st.Container(name).Status.Terminal()
	}
	path := state.Open(repo).JournalPath(id, name)
	// The tail below reads again and again and stops at what it cannot
	// read; a journal that cannot be read at all is said once, here.
	if err := state.CheckJournal(path); err != nil {
		return nil, err
	}
	terminal := func() bool {
		if sw == nil {
			return true
		}
		return sw.terminal(name)
	}
	ch := make(chan state.Record, 64)
	go tailJournal(ctx, path, follow, terminal, ch)
	return ch, nil
}

func tailJournal(ctx context.Context, path string, follow bool, terminal func() bool, out chan<- state.Record) {
	defer close(out)
	var sent, offset int64
	for {
		// terminal is read before the file so that records written just
		// before the container became terminal are still sent.
		done := !follow || terminal()
		if st, err := os.Stat(path); err == nil && st.Size() < offset {
			offset = 0 // rewritten shorter: read it again; seq skips what was sent
		}
		var recs []state.Record
		recs, offset, _ = state.ReadJournalFrom(path, offset)
		for _, r := range recs {
			if r.Seq <= sent {
				continue
			}
			select {
			case out <- r:
				sent = r.Seq
			case <-ctx.Done():
				return
			}
		}
		if done {
			return
		}
		t := time.NewTimer(journalPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
