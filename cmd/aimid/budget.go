package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/budget"
	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitserve"
	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/state"
)

// openBudgets makes the keeper of swarm.budget and agent.story_budget: the
// model gateway's meter tells it the cost of every call that began after
// it (earlier ones it reads back from the journals), and the runners ask it
// at each story boundary on their own budget sockets (sandboxes without a
// network, either git mode) or else through the daemon's git service. The
// model gateway asks it before every call (the budgets' hard cap).
func openBudgets(global *configs.Config, base configs.LoadOptions, git *gitserve.Service, models orchestrator.ModelAccess, meter *usageObserver, log *slog.Logger) contract.Budgets {
	k := budget.New(budget.Config{Limits: budgetLimits(global, base, log, configs.Load), Seed: journaledSpend, Logger: log})
	meter.onSpend(k.Add)
	if ma, ok := models.(modelAdapter); ok && ma.Service != nil {
		ma.Service.SetBudget(k)
	}
	var b contract.Budgets = k
	if d, err := time.ParseDuration(os.Getenv(envBudgetDelay)); err == nil && d > 0 {
		log.Warn("budget answers are delayed (a test hook)", "env", envBudgetDelay, "delay", d)
		b = slowBudgets{Budgets: k, delay: d}
	}
	if git != nil {
		git.SetBudgets(b)
	}
	return b
}

// envBudgetDelay, a duration, delays every budget answer: a test hook
// that stands in for a daemon slow to answer (loaded, or just restarted).
const envBudgetDelay = "AIMI_TEST_BUDGET_DELAY"

// slowBudgets answers after delay, or not at all when the question is
// given up meanwhile.
type slowBudgets struct {
	contract.Budgets
	delay time.Duration
}

func (s slowBudgets) ServeBudget(w http.ResponseWriter, r *http.Request, from contract.Caller) {
	// The question is read first: the socket bounds the time a request
	// may take to arrive, and the delay is the daemon's, not the sender's.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, contract.BudgetMaxBody))
	if err != nil {
		http.Error(w, "aimi: budget question refused: not a budget request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		s.Budgets.ServeBudget(w, r, from)
	case <-r.Context().Done():
	}
}

// budgetLimits reads the budgets of a repository's swarm at each question,
// from the configuration layers as they are now (a budget raised in the
// user's or the repository's config file holds at the next resume); a
// layer that no longer reads keeps the daemon's own. Every story of every
// container asks, so a repository's budgets are read again only when one
// of its files changed (configStamp); load is configs.Load.
func budgetLimits(global *configs.Config, base configs.LoadOptions, log *slog.Logger, load func(configs.LoadOptions) (*configs.Config, error)) func(string) budget.Limits {
	type read struct {
		stamp string
		lim   budget.Limits
	}
	var mu sync.Mutex
	last := map[string]read{} // by repository
	return func(repoPath string) budget.Limits {
		opts := base
		opts.RepoPath = repoPath
		stamp, stable := configStamp(opts.Files(), time.Now())
		mu.Lock()
		r, ok := last[repoPath]
		mu.Unlock()
		if ok && stable && r.stamp == stamp {
			return r.lim
		}
		c, err := load(opts)
		if err != nil {
			log.Warn("budgets: the configuration does not read now; the daemon's own budgets hold", "repo", repoPath, "err", err)
			c = global
		}
		lim := budget.Limits{Swarm: c.Swarm.Budget, Story: c.Agent.StoryBudget, Grace: c.Swarm.BudgetGrace}
		mu.Lock()
		if stable && err == nil {
			last[repoPath] = read{stamp, lim}
		} else {
			delete(last, repoPath)
		}
		mu.Unlock()
		return lim
	}
}

// configStamp names what files are now (where each leads, its size, its
// time, its inode, or that it is missing). stable is false while one
// changed in the last two seconds: a write within the file system's time
// granularity could leave the same stamp on other content, so such a
// file is read every time until it is older.
func configStamp(files []string, now time.Time) (stamp string, stable bool) {
	var b strings.Builder
	stable = true
	for _, p := range files {
		for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
			fi, err := stat(p)
			if err != nil {
				fmt.Fprintf(&b, "%q missing;", p)
				continue
			}
			var ino uint64
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				ino = st.Ino
			}
			fmt.Fprintf(&b, "%q %v %d %d %d;", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), ino)
			if now.Sub(fi.ModTime()) < 2*time.Second {
				stable = false
			}
		}
	}
	return b.String(), stable
}

// journaledSpend reads back the calls a swarm's journals hold from before
// this daemon started, those of containers rerun (journals moved aside)
// included.
func journaledSpend(ctx context.Context, repoPath, swarmID string, before time.Time) ([]budget.Spend, error) {
	dir := state.Open(repoPath).SwarmJournals(swarmID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []budget.Spend
	var errs []error
	for _, e := range entries {
		name, _, ok := strings.Cut(e.Name(), ".ndjson")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		_, err := state.ScanJournalFrom(filepath.Join(dir, e.Name()), 0, func(r state.Record) error {
			if r.Usage != nil && r.Stream == state.StreamDaemon && r.Time.Before(before) {
				out = append(out, budget.Spend{Container: name, At: r.Time, Cost: r.Usage.Cost})
			}
			return ctx.Err()
		})
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// onSpend makes o tell f every call's cost from now on.
func (o *usageObserver) onSpend(f func(sb contract.Sandbox, at time.Time, cost float64)) {
	o.mu.Lock()
	o.spent = f
	o.mu.Unlock()
}
