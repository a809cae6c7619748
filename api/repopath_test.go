package api

import (
	"strings"
	"testing"
)

func TestCheckRepoPath(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		ok         bool
		shows      string
	}{
		{"plain path is accepted", "/home/u/repo", true, ""},
		{"spaces and non-ASCII letters are accepted", "/home/u/my repo é", true, ""},
		{"trailing newline is refused and shown as \\n", "/home/u/my repo é\n", false, `é\n"`},
		{"tab inside is refused", "/home/u/a\tb", false, `\t`},
		{"escape is refused", "/home/u/\x1b[31mred", false, `\x1b`},
		{"C1 control is refused", "/home/u/a\u0085b", false, `\u0085`},
		{"invalid UTF-8 is refused", "/home/u/\xff", false, `\xff`},
		{"relative path is refused", "repo", false, `"repo"`},
		{"unclean path is refused", "/home/u/../u/repo", false, "clean"},
		{"empty path is refused", "", false, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRepoPath(tc.path)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.shows) || strings.ContainsAny(err.Error(), "\n\t\x1b") {
				t.Errorf("message %q does not show the path unambiguously (want %q in it)", err, tc.shows)
			}
		})
	}
}

func FuzzCheckRepoPath(f *testing.F) {
	for _, s := range []string{"/a", "/a\n", "/a/../b", "", "/\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if err := CheckRepoPath(p); err != nil && strings.ContainsAny(err.Error(), "\n\r\t\x1b") {
			t.Fatalf("message carries a control character: %q", err)
		}
	})
}
