package gitref

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var patternRe = regexp.MustCompile(Pattern)

func unquote(s string) (string, error) { return strconv.Unquote(s) }

// FuzzCheckBranch: whatever the input, the check returns, a name it accepts
// keeps every rule (spec pattern, length, git's rules), and a refusal names
// a rule in a bounded message.
func FuzzCheckBranch(f *testing.F) {
	for _, s := range []string{"feat/x", "a//b", "HEAD", "a.lock", "a/", "x@{y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckBranch(name)
		if err == nil {
			if !patternRe.MatchString(name) || len(name) > MaxBranchBytes || name == "HEAD" ||
				strings.Contains(name, "//") || strings.HasSuffix(name, "/") || CheckRefFormat("refs/heads/"+name) != nil {
				t.Fatalf("accepted %q, which breaks a rule", name)
			}
			return
		}
		if len(err.Error()) > 400 {
			t.Fatalf("message of %d bytes for %q", len(err.Error()), name)
		}
	})
}
