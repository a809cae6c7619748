// Package ledger is the model gateway's Observer that accounts for every
// call: it meters each answer's token usage as it streams (usage.Meter),
// prices it, hands its cost to the budgets and journals the call, and the
// gateway's limit waits with it, in its container's journal. The journal
// itself, the budgets and the prices' configuration are left to others.
//
// It is a package of its own beside usage because it takes the gateway's
// calls, and the gateway imports usage for the limits' rules.
package ledger
