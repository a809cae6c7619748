package orchestrator

import (
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
)

func TestNotePushFailedReadsTheReportedCommits(t *testing.T) {
	for _, tc := range []struct {
		code, text string
		failed     bool
		ids        []string
	}{
		{"", "GIT_PUSH_FAILED: 2 commit(s) of feat/x were not received (608c27b15d6d 1a2b3c4d5e6f and 3 more); they stay", true, []string{"608c27b15d6d", "1a2b3c4d5e6f"}},
		{acpmsg.CodeGitPushFailed, "the container reported completed, but its branch feat/x holds commit(s) the git service never received (abcdef1234567)", true, []string{"abcdef1234567"}},
		{"", "GIT_PUSH_FAILED: could not list the commits it lacks (exit 128)", true, nil},
		{"", "AGENT_CRASH: exited (608c27b15d6d)", false, nil},
		{"OTHER", "GIT_PUSH_FAILED: (608c27b15d6d)", false, nil},
	} {
		var c ctr
		c.notePushFailed(tc.code, tc.text)
		if c.pushFailed != tc.failed || !slices.Equal(c.unpushed, tc.ids) {
			t.Errorf("%q %q: failed %v ids %q, want %v %q", tc.code, tc.text, c.pushFailed, c.unpushed, tc.failed, tc.ids)
		}
	}
}

// FuzzNotePushFailed: a container's error text (untrusted) yields at most
// maxUnpushedIDs short hex ids and never panics.
func FuzzNotePushFailed(f *testing.F) {
	f.Add("", "GIT_PUSH_FAILED: 1 commit(s) of feat/x were not received (608c27b15d6d); they stay")
	f.Add(acpmsg.CodeGitPushFailed, "("+strings.Repeat("abcdef1 ", 40)+")")
	f.Fuzz(func(t *testing.T, code, text string) {
		var c ctr
		c.notePushFailed(code, text)
		if len(c.unpushed) > maxUnpushedIDs {
			t.Fatalf("%d ids kept", len(c.unpushed))
		}
		for _, id := range c.unpushed {
			if len(id) < 7 || len(id) > 40 || strings.Trim(id, "0123456789abcdef") != "" {
				t.Fatalf("id %q", id)
			}
		}
	})
}
