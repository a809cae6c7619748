package aimid

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/budget"
	"github.com/aimi-tools/swarm/configs"
)

// A repository's budgets are those of its configuration layers, the
// user's and its own file; loaded again only when one of the files
// changed, and the daemon's own while one does not read.
func TestBudgetsAreReadFromTheConfigurationLayers(t *testing.T) {
	t.Parallel()
	repo, home := t.TempDir(), t.TempDir()
	user := filepath.Join(home, "config.yaml")
	cfgPath := filepath.Join(repo, configs.RepoConfigPath)
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	write := func(p, body string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(user, "agent:\n  story_budget: 2\n", old)
	write(cfgPath, "swarm:\n  budget: 5\n", old)
	noEnv := func(string) (string, bool) { return "", false }
	loads := 0
	load := func(o configs.LoadOptions) (*configs.Config, error) { loads++; return configs.Load(o) }
	global, err := configs.Load(configs.LoadOptions{UserConfigPath: "-", LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	limits := budget.ReadLimits(budgetLayers(global, configs.LoadOptions{UserConfigPath: user, LookupEnv: noEnv}, load), slog.New(slog.DiscardHandler))
	check := func(step string, want budget.Limits, wantLoads int) {
		t.Helper()
		if got := limits(repo); got != want || loads != wantLoads {
			t.Errorf("%s: %+v after %d loads, want %+v after %d", step, got, loads, want, wantLoads)
		}
	}
	check("first question", budget.Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	check("same files", budget.Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	write(cfgPath, "swarm:\n  budget: 7\n", old.Add(time.Minute))
	check("repository's file changed", budget.Limits{Swarm: 7, Story: 2, Grace: 0.1}, 2)
	write(user, "agent:\n  story_budget: 3\n", old.Add(2*time.Minute))
	check("user's file changed", budget.Limits{Swarm: 7, Story: 3, Grace: 0.1}, 3)
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	check("repository's file gone", budget.Limits{Story: 3, Grace: 0.1}, 4)
	write(cfgPath, "swarm:\n  budget: lots\n", old.Add(3*time.Minute))
	check("a file that does not read: the daemon's own", budget.Limits{Grace: 0.1}, 5)
}
