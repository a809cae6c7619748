package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/state"
)

// Journal streams the journal records of one container of the repo's
// swarm, from the end q selects (found by reading backwards); with Follow it
// goes on until the container is terminal and its journal fully read, or
// ctx ends. The journal is read one record at a time as the channel takes
// them: a reader costs a few records of memory, whatever the journal holds.
func (m *Manager) Journal(ctx context.Context, q api.LogsRequest) (<-chan state.Record, error) {
	name, follow := q.Name, q.Follow
	repo, err := m.cleanRepo(q.RepoPath)
	if err != nil {
		return nil, err
	}
	if name == state.LandJournal {
		return m.landJournal(ctx, repo, q)
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
	path := state.Open(repo).JournalPath(contract.Sandbox{Swarm: id, Container: name})
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
	offset, err := state.JournalStart(path, state.From{Tail: q.Tail, Since: q.Since, AfterSeq: q.AfterSeq})
	if err != nil {
		return nil, err
	}
	// A few records in flight: a record can be some hundred KiB.
	ch := make(chan state.Record, 8)
	go tailJournal(ctx, path, offset, q.AfterSeq, follow, terminal, ch)
	return ch, nil
}

// landJournal serves the swarm's land journal (`aimi swarm logs land`),
// following it while a land runs.
func (m *Manager) landJournal(ctx context.Context, repo string, q api.LogsRequest) (<-chan state.Record, error) {
	var id string
	landing := func() bool { return false }
	if sw := m.getSwarm(repo); sw != nil {
		id = sw.id
		landing = func() bool {
			if sw.landing.TryLock() {
				sw.landing.Unlock()
				return false
			}
			return true
		}
	} else {
		st, err := state.Open(repo).Load(ctx)
		if errors.Is(err, state.ErrNoState) {
			return nil, api.ErrNoSwarm
		}
		if err != nil {
			return nil, err
		}
		id = st.SwarmID
	}
	path := state.Open(repo).LandJournalPath(id)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: no land of this swarm yet ('aimi swarm land' starts one)", api.ErrUnknownContainer)
	}
	offset, err := state.JournalStart(path, state.From{Tail: q.Tail, Since: q.Since, AfterSeq: q.AfterSeq})
	if err != nil {
		return nil, err
	}
	ch := make(chan state.Record, 8)
	go tailJournal(ctx, path, offset, q.AfterSeq, q.Follow, func() bool { return !landing() }, ch)
	return ch, nil
}

// tailJournal sends the records of path from offset with a seq above sent.
func tailJournal(ctx context.Context, path string, offset, sent int64, follow bool, terminal func() bool, out chan<- state.Record) {
	defer close(out)
	for {
		// terminal is read before the file so that records written just
		// before the container became terminal are still sent.
		done := !follow || terminal()
		if st, err := os.Stat(path); err == nil && st.Size() < offset {
			offset = 0 // rewritten shorter: read it again; seq skips what was sent
		}
		offset, _ = state.ScanJournalFrom(path, offset, func(r state.Record) error {
			if r.Seq <= sent {
				return nil
			}
			select {
			case out <- r:
				sent = r.Seq
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if ctx.Err() != nil {
			return
		}
		if done {
			return
		}
		if ctxutil.Sleep(ctx, journalPoll) != nil {
			return
		}
	}
}
