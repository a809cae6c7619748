package attempts

import (
	"strings"
	"testing"
	"time"
)

func f(v float64) *float64 { return &v }

func TestPickOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		cands  []Candidate
		want   int
		reason string
	}{
		{"none qualifies", []Candidate{{Attempt: 1}, {Attempt: 2}}, -1, "none of 2 attempts verified"},
		{"the only verified one wins whatever else", []Candidate{
			{Attempt: 1, Score: f(9), Lines: 1},
			{Attempt: 2, Qualified: true, Lines: 5000, Cost: 9},
			{Attempt: 3, Score: f(10)}}, 1, "verified; the only one of 3"},
		{"score first, higher wins over fewer lines", []Candidate{
			{Attempt: 1, Qualified: true, Score: f(0.85), Lines: 10},
			{Attempt: 2, Qualified: true, Score: f(0.91), Lines: 1204}}, 1, "verified; score 0.91 vs 0.85"},
		{"a score beats none", []Candidate{
			{Attempt: 1, Qualified: true, Lines: 1},
			{Attempt: 2, Qualified: true, Score: f(-3), Lines: 9}}, 1, "verified; score -3 vs none"},
		{"equal scores: fewer lines", []Candidate{
			{Attempt: 1, Qualified: true, Score: f(1), Lines: 1877},
			{Attempt: 2, Qualified: true, Score: f(1), Lines: 1204},
			{Attempt: 3, Qualified: false, Score: f(2), Lines: 1}}, 1, "verified; score 1 vs 1; 1,204 vs 1,877 lines"},
		{"unknown lines lose", []Candidate{
			{Attempt: 1, Qualified: true, Lines: -1},
			{Attempt: 2, Qualified: true, Lines: 7}}, 1, "verified; 7 vs ? lines"},
		{"equal lines: lower cost", []Candidate{
			{Attempt: 1, Qualified: true, Lines: 5, Cost: 0.5},
			{Attempt: 2, Qualified: true, Lines: 5, Cost: 0.25}}, 1, "verified; 5 vs 5 lines; cost 0.25 vs 0.50"},
		{"equal cost: earlier finish", []Candidate{
			{Attempt: 1, Qualified: true, Lines: 5, Finished: t0.Add(time.Minute)},
			{Attempt: 2, Qualified: true, Lines: 5, Finished: t0}}, 1, "verified; 5 vs 5 lines; finished first"},
		{"all equal: the lower attempt", []Candidate{
			{Attempt: 1, Qualified: true, Lines: 5, Finished: t0},
			{Attempt: 2, Qualified: true, Lines: 5, Finished: t0}}, 0, "verified; 5 vs 5 lines; the lower attempt number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := Pick(c.cands)
			if got != c.want || why != c.reason {
				t.Errorf("Pick = %d %q, want %d %q", got, why, c.want, c.reason)
			}
		})
	}
}

func TestNamesAndBranches(t *testing.T) {
	if got := Name("aimi-auth", 3); got != "aimi-auth-a3" {
		t.Errorf("Name = %q", got)
	}
	b := Branch("feat/x", 12)
	if b != "feat/x--a12" {
		t.Errorf("Branch = %q", b)
	}
	if base, k, ok := BaseBranch(b); !ok || base != "feat/x" || k != 12 {
		t.Errorf("BaseBranch(%q) = %q %d %v", b, base, k, ok)
	}
	for _, no := range []string{"feat/x", "--a1", "feat/x--a0", "feat/x--a01", "feat/x--a17", "feat/x--ab"} {
		if _, _, ok := BaseBranch(no); ok {
			t.Errorf("BaseBranch(%q) took it for an attempt's branch", no)
		}
	}
	for k, want := range map[int]int{1: 0, 2: 1, 3: 0, 4: 1} {
		if got := VariantIndex(k, 2); got != want {
			t.Errorf("VariantIndex(%d, 2) = %d, want %d", k, got, want)
		}
	}
	if VariantIndex(1, 0) != -1 {
		t.Error("no variants must give -1")
	}
	if Thousands(1234567) != "1,234,567" || Thousands(999) != "999" || Thousands(-1204) != "-1,204" {
		t.Error("Thousands")
	}
}

func TestParseScore(t *testing.T) {
	for in, want := range map[string]float64{"0.91\n": 0.91, "building...\nok\n  42 \n\n": 42, "-1e3": -1000} {
		if got, err := ParseScore(in); err != nil || got != want {
			t.Errorf("ParseScore(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n\n", "NaN", "Inf", "score: 3", strings.Repeat("9", 400)} {
		if _, err := ParseScore(in); err == nil {
			t.Errorf("ParseScore(%q) took it", in)
		}
	}
}

func FuzzParseScore(f *testing.F) {
	for _, s := range []string{"0.91", "x\n1", "", "NaN", "\x1b[31m1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseScore(s)
		if err == nil && (v != v || v > 1e300 || v < -1e300) {
			t.Fatalf("ParseScore(%q) = %v", s, v)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("error unbounded: %d bytes", len(err.Error()))
		}
	})
}
