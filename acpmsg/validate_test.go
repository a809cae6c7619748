package acpmsg

import (
	"regexp"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// The byte-loop matchers must agree with the spec's regexes.
func TestPatternMatchersAgreeWithSpecRegexes(t *testing.T) {
	inputs := []string{"", "a", "A", "_", "-", "9", "US-001", "US-1234", "us-001", "US-00a", "US_001", "US-٠٠١",
		"feat/x", "-x", "x-", "a/b_c-d", "a.b", "a b", "é", "A_B", "AB9", "_A", "9A", "A-B", "CONTAINER_OOM", "Ab",
		"a/", "a//b", "ZZ_", "US-001\n", "A\x00"}
	checks := []struct {
		pattern string
		fn      func(string) bool
	}{
		{PatternStoryID, ValidStoryID},
		{PatternEnvKey, contract.ValidEnvKey},
		{PatternCodeName, ValidErrorCode},
	}
	for _, c := range checks {
		re := regexp.MustCompile(c.pattern)
		for _, in := range inputs {
			if got, want := c.fn(in), re.MatchString(in); got != want {
				t.Errorf("%s on %q: matcher %v, regexp %v", c.pattern, in, got, want)
			}
		}
	}
}
