package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/aimi-tools/swarm/internal/safefile"
)

// landRecordFile is a swarm's land record, beside its journals. It is a
// file of its own, not a section of the state file: that file's schema is
// closed (the shell tools validate it), and a land's record is the
// daemon's alone.
const landRecordFile = "land.json"

// maxLandRecord bounds what is read back of a record (a swarm of
// thousands of containers stays far below it).
const maxLandRecord = 8 << 20

func (sw *swarm) landRecordPath() string {
	return filepath.Join(sw.store.SwarmJournals(sw.id), landRecordFile)
}

// saveLand writes the land's record (atomically: a crash leaves the one
// before or this one) and keeps it for the view.
func (sw *swarm) saveLand(rep *api.LandReport) error {
	rep.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	path := sw.landRecordPath()
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("land: record: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("land: record %s: %w", path, err)
	}
	cp := *rep
	cp.Results = append([]api.LandResult(nil), rep.Results...)
	sw.mu.Lock()
	sw.lastLand = &cp
	sw.mu.Unlock()
	return nil
}

// landView is the swarm's last land for its view: the one in memory, or
// the record on disk (after a restart), nil when there is none.
func (sw *swarm) landView() *api.LandReport {
	sw.mu.Lock()
	last := sw.lastLand
	sw.mu.Unlock()
	if last != nil {
		return last
	}
	rep, err := sw.loadLand()
	if err != nil || rep == nil {
		return nil
	}
	if !sw.landing.TryLock() {
		return rep
	}
	defer sw.landing.Unlock()
	// Read while no land runs: one that says it runs was cut short.
	rep.Cut = rep.Cut || rep.Running
	rep.Running = false
	sw.mu.Lock()
	if sw.lastLand == nil {
		sw.lastLand = rep
	}
	sw.mu.Unlock()
	return rep
}

// loadLand reads the land's record, nil when there is none.
func (sw *swarm) loadLand() (*api.LandReport, error) {
	b, err := safefile.Read(sw.landRecordPath(), maxLandRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("land: read the record %s: %w", sw.landRecordPath(), err)
	}
	var rep api.LandReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("land: read the record %s: %w", sw.landRecordPath(), err)
	}
	return &rep, nil
}
