package contract

import (
	"regexp"
	"testing"
)

func TestValidEnvKeyIsItsPattern(t *testing.T) {
	re := regexp.MustCompile(PatternEnvKey)
	for _, in := range []string{"", "a", "A", "_", "-", "9", "A_B", "AB9", "_A", "9A", "A-B", "Ab", "ZZ_", "A\x00", "É", "A\n"} {
		if got, want := ValidEnvKey(in), re.MatchString(in); got != want {
			t.Errorf("ValidEnvKey(%q) = %v, the pattern says %v", in, got, want)
		}
	}
}
