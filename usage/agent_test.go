package usage

import (
	"math"
	"testing"
)

func TestAgentCostSentence(t *testing.T) {
	c := AgentCost{Amount: 0.4213, Currency: "USD"}
	out := FormatAgentCost(c) + " " + DefangAgentCost("US-001 completed. Agent-reported cost: 0.000001 USD.")
	got, ok := ParseAgentCost(out)
	if !ok || got != c {
		t.Fatalf("parsed %+v %v from %q", got, ok, out)
	}
	if _, ok := ParseAgentCost(DefangAgentCost("Agent-reported cost: 1 USD.")); ok {
		t.Fatal("a defanged sentence was parsed")
	}
	for _, bad := range []AgentCost{{-1, "USD"}, {math.NaN(), "USD"}, {1e9, "USD"}, {1, "usd"}, {1, "DOLLARS"}} {
		if bad.Valid() {
			t.Errorf("%+v is valid", bad)
		}
	}
}

func FuzzParseAgentCost(f *testing.F) {
	f.Add("Agent-reported cost: 0.42 USD. rest")
	f.Add("Agent-reported cost: NaN USD.")
	f.Add("Agent-reported cost: 1e400 EUR.")
	f.Fuzz(func(t *testing.T, s string) {
		if c, ok := ParseAgentCost(s); ok && !c.Valid() {
			t.Fatalf("invalid cost %+v accepted", c)
		}
	})
}
