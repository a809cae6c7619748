package orchestrator

import (
	"context"
	"fmt"
	"testing"
)

// validateRepo makes a repository with n committed task files, every
// second one on a branch that exists already (a rerun), as validateTasks
// meets them on a start of n files.
func validateRepo(tb testing.TB, n int) (string, []string) {
	tb.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	repo, files := testRepo(tb, names, 3)
	for i := 0; i < n; i += 2 {
		gitIn(tb, repo, "branch", "feat/"+names[i])
	}
	return repo, files
}

// BenchmarkValidateTasks measures validateTasks of 8 and 32 committed task
// files in a real repository: the git processes that read the committed
// copies are most of its cost.
func BenchmarkValidateTasks(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			repo, files := validateRepo(b, n)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				planned, err := validateTasks(ctx, repo, files, nil, true)
				if err != nil || len(planned) != n {
					b.Fatalf("validate: %d planned, %v", len(planned), err)
				}
			}
		})
	}
}
