package attempts

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Candidate is what the pick knows of one finished attempt.
type Candidate struct {
	Attempt int // 1-based
	// Qualified: every story completed and the verify command passed on
	// its last commit. Only qualified attempts can be picked.
	Qualified bool
	// Score is swarm.score_command's number for its tip; nil without a
	// score command, or when it failed or printed no number (ranked below
	// every attempt with a score).
	Score *float64
	// Lines is how many lines its branch changed (added plus deleted);
	// negative when unknown (ranked below every known count).
	Lines int
	// Cost is what its model calls cost (0 without the gateway).
	Cost float64
	// Finished is when it ended.
	Finished time.Time
}

// Compare orders two qualified candidates, the better first: the higher
// score, then fewer changed lines, then the lower cost, then the earlier
// finish, then the lower attempt number (so the order is total).
func Compare(a, b Candidate) int {
	if c := compareScore(a.Score, b.Score); c != 0 {
		return c
	}
	if c := compareLines(a.Lines, b.Lines); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Cost, b.Cost); c != 0 {
		return c
	}
	if c := a.Finished.Compare(b.Finished); c != 0 {
		return c
	}
	return cmp.Compare(a.Attempt, b.Attempt)
}

// compareScore: a score beats none; the higher beats the lower.
func compareScore(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return cmp.Compare(*b, *a)
}

// compareLines: a known count beats an unknown one; fewer beat more.
func compareLines(a, b int) int {
	switch {
	case a < 0 && b < 0:
		return 0
	case a < 0:
		return 1
	case b < 0:
		return -1
	}
	return cmp.Compare(a, b)
}

// Pick returns the index in cands of the best qualified candidate and
// why it won, or -1 and why none did.
func Pick(cands []Candidate) (int, string) {
	var q []int
	for i, c := range cands {
		if c.Qualified {
			q = append(q, i)
		}
	}
	switch len(q) {
	case 0:
		return -1, fmt.Sprintf("none of %d attempts verified", len(cands))
	case 1:
		if len(cands) == 1 {
			return q[0], "verified"
		}
		return q[0], "verified; the only one of " + strconv.Itoa(len(cands))
	}
	slices.SortStableFunc(q, func(i, j int) int { return Compare(cands[i], cands[j]) })
	return q[0], Reason(cands[q[0]], cands[q[1]])
}

// Reason says why w ranks before r, the runner-up: the criteria up to
// the one that decided, each as "w's vs r's".
func Reason(w, r Candidate) string {
	parts := []string{"verified"}
	if w.Score != nil || r.Score != nil {
		parts = append(parts, "score "+scoreText(w.Score)+" vs "+scoreText(r.Score))
		if compareScore(w.Score, r.Score) != 0 {
			return strings.Join(parts, "; ")
		}
	}
	parts = append(parts, linesText(w.Lines)+" vs "+linesText(r.Lines)+" lines")
	if compareLines(w.Lines, r.Lines) != 0 {
		return strings.Join(parts, "; ")
	}
	if w.Cost != r.Cost {
		return strings.Join(append(parts, fmt.Sprintf("cost %.2f vs %.2f", w.Cost, r.Cost)), "; ")
	}
	if !w.Finished.Equal(r.Finished) {
		return strings.Join(append(parts, "finished first"), "; ")
	}
	return strings.Join(append(parts, "the lower attempt number"), "; ")
}

func scoreText(s *float64) string {
	if s == nil {
		return "none"
	}
	return strconv.FormatFloat(*s, 'g', 6, 64)
}

func linesText(n int) string {
	if n < 0 {
		return "?"
	}
	return Thousands(n)
}

// Thousands writes n with a comma between each group of three digits
// (1,204).
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ParseScore reads a score command's output: the last non-empty line, a
// decimal number (whitespace around it allowed). Anything else is an
// error naming what was found. out is the command's output, untrusted:
// only its last line is looked at, and that bounded.
func ParseScore(out string) (float64, error) {
	lines := strings.Split(strings.TrimRight(out, " \t\r\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return 0, fmt.Errorf("the score command printed nothing; print one number (higher is better) as its last line")
	}
	if len(last) > 64 {
		return 0, fmt.Errorf("the score command's last line is %d bytes, not a number; print one number (higher is better) as its last line", len(last))
	}
	f, err := strconv.ParseFloat(last, 64)
	if err != nil || f != f || f > 1e300 || f < -1e300 {
		return 0, fmt.Errorf("the score command's last line %q is not a number; print one number (higher is better) as its last line", last)
	}
	return f, nil
}
