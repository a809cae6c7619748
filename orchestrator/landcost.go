package orchestrator

import (
	"os"
	"slices"
	"sync"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage/fold"
)

// costFolds are the usage folds of a swarm's containers' journals, each
// read on from where the last view stopped: a view costs the records
// written since, not the journals.
type costFolds struct {
	mu    sync.Mutex
	folds map[string]*costFold
}

type costFold struct {
	f      *fold.Fold
	offset int64
}

// cost is container's cost so far, the figure `aimi swarm usage` prints
// for it (package fold, over the same journal); 0 without a journal.
func (sw *swarm) cost(container string) float64 {
	path := sw.store.JournalPath(contract.Sandbox{Swarm: sw.id, Container: container})
	cf := &sw.costs
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.folds == nil {
		cf.folds = map[string]*costFold{}
	}
	c := cf.folds[container]
	if st, err := os.Stat(path); c == nil || err != nil || st.Size() < c.offset {
		// New, gone, or rewritten shorter (a rerun's journal): read it again.
		c = &costFold{f: fold.New()}
		cf.folds[container] = c
	}
	c.offset, _ = state.ScanJournalFrom(path, c.offset, func(r state.Record) error {
		c.f.Add(r)
		return nil
	})
	return c.f.Result(container).Cost
}

// withCosts is a copy of rep with each branch's container's cost, its
// checks' and fix-ups' (RunsCost), and the land's own: every check and
// fix-up it ran. nil for nil.
func (sw *swarm) withCosts(rep *api.LandReport) *api.LandReport {
	if rep == nil {
		return nil
	}
	cp := *rep
	cp.Results = slices.Clone(rep.Results)
	cp.Cost = 0
	ctrs := sw.list()
	for i := range cp.Results {
		r := &cp.Results[i]
		r.Cost, r.RunsCost = sw.cost(r.Container), 0
		for _, c := range ctrs {
			if c.taskFile == land.FixupTaskPath(r.Container) || c.taskFile == land.VerifyTaskPath(r.Container) {
				r.RunsCost += sw.cost(c.name)
			}
		}
		cp.Cost += r.RunsCost
	}
	return &cp
}
