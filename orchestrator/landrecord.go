package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/safefile"
	"github.com/aimi-tools/swarm/state"
)

// The land's record is the state file's land section (state.Land),
// written under the file's lock like every save. Daemons before it kept
// the record in a file of its own beside the swarm's journals: the first
// read of a swarm without the section moves that file's record into it.
const legacyLandRecordFile = "land.json"

// maxLandRecord bounds what is read back of a legacy record (a swarm of
// thousands of containers stays far below it).
const maxLandRecord = 8 << 20

func (sw *swarm) legacyLandPath() string {
	return filepath.Join(sw.store.SwarmJournals(sw.id), legacyLandRecordFile)
}

// saveLand writes the land's record into the state file (one atomic save
// under the file's lock: a crash leaves the one before or this one; the
// containers' entries stay as the file has them) and keeps it for the
// view.
func (sw *swarm) saveLand(rep *api.LandReport) error {
	rep.Updated = time.Now().UTC()
	rec := landRecordOf(rep)
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteWait)
	defer cancel()
	if err := sw.store.Update(ctx, func(s *state.Swarm) error { s.Land = rec; return nil }); err != nil {
		return fmt.Errorf("land: record in %s: %w", sw.store.Path(), err)
	}
	cp := *rep
	cp.Results = slices.Clone(rep.Results)
	sw.mu.Lock()
	sw.lastLand, sw.landRead = &cp, true
	sw.mu.Unlock()
	return nil
}

// landView is the swarm's last land for its view: the one in memory, or
// the record in the state file (after a restart), nil when there is none.
func (sw *swarm) landView() *api.LandReport {
	sw.mu.Lock()
	last, read := sw.lastLand, sw.landRead
	sw.mu.Unlock()
	if last != nil || read {
		return last
	}
	rep, err := sw.loadLand()
	if err != nil {
		return nil // a state file that cannot be read fails louder elsewhere
	}
	if rep != nil {
		if !sw.landing.TryLock() {
			return rep
		}
		defer sw.landing.Unlock()
		// Read while no land runs: one that says it runs was cut short.
		rep.Cut = rep.Cut || rep.Running
		rep.Running = false
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if !sw.landRead {
		// A land that saved meanwhile is the newer record.
		sw.lastLand, sw.landRead = rep, true
	}
	return sw.lastLand
}

// loadLand reads the land's record from the state file, nil when there is
// none. The record of a swarm without the section that an earlier daemon
// kept in a file of its own is moved into it, and that file removed.
func (sw *swarm) loadLand() (*api.LandReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteWait)
	defer cancel()
	st, err := sw.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("land: read the record in %s: %w", sw.store.Path(), err)
	}
	if st.Land != nil {
		return landReportOf(sw.repo, st.Land), nil
	}
	old, err := sw.legacyLand()
	if err != nil || old == nil {
		return nil, err
	}
	rec := landRecordOf(old)
	err = sw.store.Update(ctx, func(s *state.Swarm) error {
		if s.Land == nil { // a land that saved meanwhile is the newer record
			s.Land = rec
		}
		rec = s.Land
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("land: move the record of %s into %s: %w", sw.legacyLandPath(), sw.store.Path(), err)
	}
	sw.m.log.Info("land: moved the record into the state file", "swarm", sw.id, "from", sw.legacyLandPath())
	if err := os.Remove(sw.legacyLandPath()); err != nil {
		sw.m.log.Warn("land: the record is in the state file now, but its old file stays", "file", sw.legacyLandPath(), "err", err)
	}
	return landReportOf(sw.repo, rec), nil
}

// legacyLand reads the record an earlier daemon wrote beside the
// journals, nil when there is none.
func (sw *swarm) legacyLand() (*api.LandReport, error) {
	path := sw.legacyLandPath()
	b, err := safefile.Read(path, maxLandRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("land: read the record %s: %w", path, err)
	}
	var rep api.LandReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("land: read the record %s: %w", path, err)
	}
	return &rep, nil
}

// landRecordOf is the state file's record of rep (its costs are the
// view's: they are worked out from the journals when shown).
func landRecordOf(rep *api.LandReport) *state.Land {
	l := &state.Land{Branch: rep.Branch, Onto: rep.Onto, OntoCommit: rep.OntoCommit, Tip: rep.Tip, Results: make([]state.LandResult, len(rep.Results)),
		Take: rep.Take, Origin: rep.Origin, PRURL: rep.PRURL, Running: rep.Running, Cut: rep.Cut, Updated: rep.Updated}
	for i, r := range rep.Results {
		l.Results[i] = state.LandResult{Container: r.Container, TaskFile: r.TaskFile, Branch: r.Branch, Outcome: r.Outcome, Reason: r.Reason,
			Tip: r.Tip, Merge: r.Merge, Files: slices.Clone(r.Files), Verify: r.Verify, Fixup: r.Fixup}
	}
	for _, k := range rep.Skipped {
		l.Skipped = append(l.Skipped, state.LandSkipped{Name: k.Name, Reason: k.Reason, Commits: slices.Clone(k.Commits)})
	}
	return l
}

// landReportOf is the report of the state file's record l of repo's
// swarm, nil for nil.
func landReportOf(repo string, l *state.Land) *api.LandReport {
	if l == nil {
		return nil
	}
	rep := &api.LandReport{RepoPath: repo, Branch: l.Branch, Onto: l.Onto, OntoCommit: l.OntoCommit, Tip: l.Tip, Results: make([]api.LandResult, len(l.Results)),
		Take: l.Take, Origin: l.Origin, PRURL: l.PRURL, Running: l.Running, Cut: l.Cut, Updated: l.Updated}
	for i, r := range l.Results {
		rep.Results[i] = api.LandResult{Container: r.Container, TaskFile: r.TaskFile, Branch: r.Branch, Outcome: r.Outcome, Reason: r.Reason,
			Tip: r.Tip, Merge: r.Merge, Files: slices.Clone(r.Files), Verify: r.Verify, Fixup: r.Fixup}
	}
	for _, k := range l.Skipped {
		rep.Skipped = append(rep.Skipped, api.Kept{Name: k.Name, Reason: k.Reason, Commits: slices.Clone(k.Commits)})
	}
	return rep
}
