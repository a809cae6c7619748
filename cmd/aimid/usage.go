package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/usage"
	"github.com/aimi-tools/swarm/usage/ledger"
)

// usageObserver is the gateway's ledger as openBudgets takes it: its
// onSpend (budget.go) sets spent, which the ledger calls with every
// call's cost.
type usageObserver struct {
	*ledger.Ledger
	mu    sync.Mutex
	spent func(sb contract.Sandbox, at time.Time, cost float64)
}

func newUsageObserver(prices map[string]usage.Prices, log *slog.Logger) *usageObserver {
	o := &usageObserver{Ledger: ledger.New(prices, log)}
	o.OnSpend(func(sb contract.Sandbox, at time.Time, cost float64) {
		o.mu.Lock()
		f := o.spent
		o.mu.Unlock()
		if f != nil {
			f(sb, at, cost)
		}
	})
	return o
}
