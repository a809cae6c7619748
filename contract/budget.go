package contract

// BudgetPath is the path, on the local-mode git service's listener, where
// acp-runner asks the daemon at each story boundary whether it may begin
// another story (swarm.budget, agent.story_budget), with its container's
// git token. The body is a BudgetRequest as JSON; the answer a
// BudgetAnswer. Any other answer (404, 503: a daemon without budgets or
// one that is starting) lets the runner go on.
const BudgetPath = "/_aimi/budget"

// BudgetMaxBody bounds a BudgetRequest on the wire.
const BudgetMaxBody = 64 << 10

// BudgetMaxStories bounds the stories of one BudgetRequest.
const BudgetMaxStories = 500

// Budget states of BudgetAnswer.
const (
	BudgetGo   = "go"   // begin the next story
	BudgetStop = "stop" // begin none: Message says what was spent of which budget
)

// BudgetRequest is the runner's question before it begins a story: the
// stories this run finished, each with when it ran (RFC 3339, the
// runner's clock), for the daemon to count the model calls the container
// made meanwhile against agent.story_budget.
type BudgetRequest struct {
	Stories []BudgetStory `json:"stories"`
}

// BudgetStory is one finished story of the run.
type BudgetStory struct {
	ID    string `json:"id"`
	Start string `json:"start"`
	End   string `json:"end"`
}

// BudgetAnswer is the daemon's answer. Message, with BudgetStop, starts
// with the error code (acpmsg.CodeBudgetExceeded) and names the figures.
type BudgetAnswer struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}
