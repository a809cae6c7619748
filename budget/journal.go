package budget

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/state"
)

// JournaledSpend is a Config.Seed: it reads back the calls a swarm's
// journals hold from before this daemon started, those of containers
// rerun (journals moved aside) included.
func JournaledSpend(ctx context.Context, repoPath, swarmID string, before time.Time) ([]Spend, error) {
	dir := state.Open(repoPath).SwarmJournals(swarmID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Spend
	var errs []error
	for _, e := range entries {
		name, _, ok := strings.Cut(e.Name(), ".ndjson")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		_, err := state.ScanJournalFrom(filepath.Join(dir, e.Name()), 0, func(r state.Record) error {
			if r.Usage != nil && r.Stream == state.StreamDaemon && r.Time.Before(before) {
				out = append(out, Spend{Container: name, At: r.Time, Cost: r.Usage.Cost})
			}
			return ctx.Err()
		})
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
