package gateway

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// limitsName is the file, in the gateway's directory, of the providers'
// resets that have not passed yet: a daemon restarted during a limit wait
// holds the calls until the same reset.
const limitsName = "limits.json"

type storedLimit struct {
	Provider string    `json:"provider"`
	Account  string    `json:"account"` // the key variable's name, never its value
	Until    time.Time `json:"until"`
	Attempt  int       `json:"attempt"`
}

type storedLimits struct {
	Limits []storedLimit `json:"limits"`
}

// load takes the resets kept in path: those passed are dropped, one
// further off than maxReset from now is cut to it (a clock set back, a
// file edited by hand). An unreadable file is logged and ignored: the
// provider answers with its limit again.
func (l *limiter) load(path string, log *slog.Logger) {
	l.store, l.log = path, log
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var st storedLimits
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		log.Warn("model gateway: the providers' resets kept across a restart are not readable; calls go out until a provider limits them again", "file", path, "err", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, s := range st.Limits {
		if !s.Until.After(now) || s.Provider == "" {
			continue
		}
		g := l.gate(gateKey{s.Provider, s.Account}, 0, 0)
		g.until, g.attempt = s.Until, max(s.Attempt, 0)
		if bound := now.Add(l.maxReset); g.until.After(bound) {
			g.until = bound
		}
		log.Info("waiting for "+s.Provider+" limit until "+g.until.Local().Format(time.TimeOnly)+" (kept across the restart)", "account", s.Account)
	}
}

// save writes the resets that have not passed when one changed. Resets
// change at limited answers only: a write per 429, outside l.mu.
func (l *limiter) save() {
	if l.store == "" {
		return
	}
	l.storeMu.Lock()
	defer l.storeMu.Unlock()
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return
	}
	l.dirty = false
	now := l.now()
	st := storedLimits{Limits: []storedLimit{}}
	for _, k := range slices.SortedFunc(maps.Keys(l.gates), func(a, b gateKey) int {
		return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.account, b.account))
	}) {
		if g := l.gates[k]; g.until.After(now) {
			st.Limits = append(st.Limits, storedLimit{k.provider, k.account, g.until.UTC(), g.attempt})
		}
	}
	l.mu.Unlock()
	data, _ := json.MarshalIndent(st, "", "  ")
	if err := atomicfile.WriteFile(l.store, data, 0o600); err != nil {
		l.mu.Lock()
		l.dirty = true
		l.mu.Unlock()
		l.log.Warn("model gateway: a provider's reset is not kept across a restart", "err", fmt.Errorf("write %s: %w (check the data directory's space and permissions)", l.store, err))
	}
}
