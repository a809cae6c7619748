package usage

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// AgentCost is the cost an ACP agent reported for its session
// (usage_update's cost: cumulative, in its currency).
type AgentCost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// maxAgentCost bounds a cost an agent may report for one session: more is
// taken as garbage.
const maxAgentCost = 1e6

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Valid reports whether c is a cost worth counting: a finite amount from
// 0 to a million, an ISO 4217 currency code.
func (c AgentCost) Valid() bool {
	return c.Amount >= 0 && c.Amount <= maxAgentCost && !math.IsNaN(c.Amount) && currencyRE.MatchString(c.Currency)
}

// agentCostMarker starts the sentence the runner puts into a story's
// progress-update output; the story's own text comes after it and has the
// marker defanged (DefangAgentCost), so the first one is the runner's.
const agentCostMarker = "Agent-reported cost: "

// FormatAgentCost is the sentence of a story's output that carries the
// cost its agent reported.
func FormatAgentCost(c AgentCost) string {
	return fmt.Sprintf("%s%s %s.", agentCostMarker, strconv.FormatFloat(c.Amount, 'f', -1, 64), c.Currency)
}

// DefangAgentCost keeps agent text from passing for the runner's sentence.
func DefangAgentCost(s string) string {
	return strings.ReplaceAll(s, agentCostMarker, "Agent-reported cost (quoted): ")
}

// ParseAgentCost finds the runner's cost sentence in a story's output.
func ParseAgentCost(output string) (AgentCost, bool) {
	i := strings.Index(output, agentCostMarker)
	if i < 0 {
		return AgentCost{}, false
	}
	rest := output[i+len(agentCostMarker):]
	amount, cur, ok := strings.Cut(rest, " ")
	if !ok || len(cur) < 4 || cur[3] != '.' {
		return AgentCost{}, false
	}
	f, err := strconv.ParseFloat(amount, 64)
	c := AgentCost{Amount: f, Currency: cur[:3]}
	if err != nil || !c.Valid() {
		return AgentCost{}, false
	}
	return c, true
}
