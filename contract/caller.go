package contract

import "net/http"

// Caller is the container a request to the daemon came from, as the
// service that took it knows it (its token, its socket): the repository,
// swarm, container and branch it was granted.
type Caller struct {
	RepoPath  string
	SwarmID   string
	Container string
	Branch    string
}

// Asks serves AskPath: a container's permission request for a person.
// The service that took the request has checked who asks.
type Asks interface {
	ServeAsk(w http.ResponseWriter, r *http.Request, from Caller)
}

// Budgets serves BudgetPath: a runner's question at a story boundary.
type Budgets interface {
	ServeBudget(w http.ResponseWriter, r *http.Request, from Caller)
}
