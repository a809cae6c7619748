package contract

import (
	"strings"
	"testing"
)

func TestCheckLabels(t *testing.T) {
	want := map[string]string{LabelSandbox: "true", LabelProject: "/src/repo"}
	for _, tc := range []struct {
		name  string
		have  map[string]string
		shows string // "" when it passes
	}{
		{"all carried, extra labels allowed", map[string]string{LabelSandbox: "true", LabelProject: "/src/repo", LabelBranch: "b"}, ""},
		{"missing label is named", map[string]string{LabelProject: "/src/repo"}, LabelSandbox + " is missing"},
		{"other value is quoted", map[string]string{LabelSandbox: "true", LabelProject: "/src/repo\n"}, `"/src/repo\n"`},
		{"no labels at all", nil, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLabels(tc.have, want)
			switch {
			case tc.shows == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.shows != "" && (err == nil || !strings.Contains(err.Error(), tc.shows)):
				t.Fatalf("got %v, want an error showing %q", err, tc.shows)
			}
		})
	}
}
