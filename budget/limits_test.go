package budget

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fileLayers read a swarm budget from the repository's file and a story
// budget from the user's (a missing file: none), counting the reads.
func fileLayers(user string, reads *int) Layers {
	files := func(repo string) []string { return []string{filepath.Join(repo, "budget"), user} }
	amount := func(p string) (float64, error) {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	}
	return Layers{
		Files: files,
		Read: func(repo string) (Limits, error) {
			*reads++
			f := files(repo)
			swarm, err := amount(f[0])
			if err != nil {
				return Limits{}, err
			}
			story, err := amount(f[1])
			return Limits{Swarm: swarm, Story: story, Grace: 0.1}, err
		},
		Fallback: Limits{Grace: 0.1},
	}
}

// The budgets are read from the configuration files at each question, but
// loaded again only when a file changed: every story of every container
// asks. A file changed in the last two seconds is read every time.
func TestBudgetLimitsAreReadAgainOnlyWhenAFileChanged(t *testing.T) {
	repo, home := t.TempDir(), t.TempDir()
	user := filepath.Join(home, "story-budget")
	cfgPath := filepath.Join(repo, "budget")
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
	write(user, "2", old)
	write(cfgPath, "5", old)
	loads := 0
	limits := ReadLimits(fileLayers(user, &loads), slog.New(slog.DiscardHandler))
	check := func(step string, want Limits, wantLoads int) {
		t.Helper()
		if got := limits(repo); got != want || loads != wantLoads {
			t.Errorf("%s: %+v after %d loads, want %+v after %d", step, got, loads, want, wantLoads)
		}
	}
	check("first question", Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	check("same files", Limits{Swarm: 5, Story: 2, Grace: 0.1}, 1)
	write(cfgPath, "7", old.Add(time.Minute))
	check("repository's file changed", Limits{Swarm: 7, Story: 2, Grace: 0.1}, 2)
	write(user, "3", old.Add(2*time.Minute))
	check("user's file changed", Limits{Swarm: 7, Story: 3, Grace: 0.1}, 3)
	write(cfgPath, "6", time.Now())
	check("a file just written", Limits{Swarm: 6, Story: 3, Grace: 0.1}, 4)
	check("a file just written, again", Limits{Swarm: 6, Story: 3, Grace: 0.1}, 5)
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	check("repository's file gone", Limits{Story: 3, Grace: 0.1}, 6)
	check("repository's file gone, again", Limits{Story: 3, Grace: 0.1}, 6)
	write(cfgPath, "lots", old.Add(3*time.Minute))
	check("a file that does not read: the daemon's own", Limits{Grace: 0.1}, 7)
	check("a file that does not read, again", Limits{Grace: 0.1}, 8)
}
