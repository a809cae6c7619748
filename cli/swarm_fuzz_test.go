package cli

import "testing"

// FuzzParseSelection feeds arbitrary answers to the task-file prompt: it
// must never panic, and what it accepts are distinct indexes in range.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{"1,3", "2 4", "1-3", "all", "0", "-1", "3-1", "1-99999999999", "٣", ", ,"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		got, err := parseSelection(s, n)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, i := range got {
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("parseSelection(%q, %d) = %v", s, n, got)
			}
			seen[i] = true
		}
	})
}
