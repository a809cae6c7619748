package usage

import (
	"fmt"
	"math"
	"time"
)

// Usage is the tokens of one or more model calls. Input counts the input
// tokens read at the full price (not from a cache); CacheRead and
// CacheWrite the input tokens read from or written to the provider's
// prompt cache. Output includes reasoning ("thinking") tokens.
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Input: sat(u.Input, v.Input), Output: sat(u.Output, v.Output),
		CacheRead: sat(u.CacheRead, v.CacheRead), CacheWrite: sat(u.CacheWrite, v.CacheWrite)}
}

// Total is every token counted.
func (u Usage) Total() int64 { return sat(sat(u.Input, u.Output), sat(u.CacheRead, u.CacheWrite)) }

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }

func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Prices are a provider's prices per million tokens, in the currency of
// the budget (swarm.budget).
type Prices struct {
	Input      float64 `json:"input" yaml:"input"`
	Output     float64 `json:"output" yaml:"output"`
	CacheRead  float64 `json:"cache_read" yaml:"cache_read"`
	CacheWrite float64 `json:"cache_write" yaml:"cache_write"`
}

// Cost is what u costs at p.
func (p Prices) Cost(u Usage) float64 {
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
}

// Check refuses negative or non-finite prices.
func (p Prices) Check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("price %s is %v: want a price per million tokens, 0 or more", f.name, f.v)
		}
	}
	return nil
}

// PricesDate is when DefaultPrices were taken from the providers' price
// lists. They are list prices of one model per provider; set
// models.<provider>.prices for the models and contracts you use.
const PricesDate = "2025-10-01"

// DefaultPrices are USD per million tokens: anthropic as Claude Sonnet 4.5
// (cache write: 5-minute cache), openai as GPT-5, gemini as Gemini 2.5 Pro
// (prompts up to 200k tokens).
func DefaultPrices() map[string]Prices {
	return map[string]Prices{
		"anthropic": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
		"openai":    {Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 0},
		"gemini":    {Input: 1.25, Output: 10, CacheRead: 0.31, CacheWrite: 0},
	}
}

// Call is one model call as the journal keeps it (a daemon record's
// "usage" member): the provider, the answer's status, the tokens its
// answer reported and their cost at the configured prices.
type Call struct {
	Provider string  `json:"provider"`
	Status   int     `json:"status"`
	Usage    Usage   `json:"tokens"`
	Cost     float64 `json:"cost"`
	// LimitedUntil is set on a limited answer (Limited): when the
	// provider's limit resets as the model gateway decided it
	// (LimitReset), and from which header (or "backoff").
	LimitedUntil *time.Time `json:"limitedUntil,omitempty"`
	LimitSource  string     `json:"limitSource,omitempty"`
}
