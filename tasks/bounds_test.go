package tasks

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/taskfiletest"
)

// TestHostileGraphIsCheckedInBoundedMemoryAndAnswer: a file under 1 MB
// whose dependency graph has a back edge at every depth (and every
// dependency many times over) is refused with a bounded answer and bounded
// allocation: a bounded number of cycles, each with a bounded path, the
// duplicate dependencies named, the rest counted.
func TestHostileGraphIsCheckedInBoundedMemoryAndAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dups       int
		wantListed []string
	}{
		{"every dependency repeated", 60, []string{`US-000.dependsOn lists "US-000" more than once (60 times)`, "more problems are not listed"}},
		{"a back edge at every depth", 1, []string{"dependency cycle US-000 -> US-001 -> US-002 -> ", "989 more dependencies close a cycle"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkBounded(t, taskfiletest.HostileGraph(1000, tc.dups), tc.wantListed...) })
	}
}

func checkBounded(t *testing.T, data []byte, wantListed ...string) {
	if len(data) > 1<<20 {
		t.Fatalf("test file is %d bytes", len(data))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, problems, warnings := Check(data)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("checking a %d-byte file allocated %d MB", len(data), alloc>>20)
	}
	answer := problems.Error()
	if len(answer) > MaxAnswerBytes {
		t.Errorf("the answer is %d bytes, over %d", len(answer), MaxAnswerBytes)
	}
	if len(problems) > MaxProblems+1 || len(warnings) > MaxProblems+1 {
		t.Errorf("%d problems and %d warnings listed", len(problems), len(warnings))
	}
	for _, w := range wantListed {
		if !strings.Contains(answer, w) {
			t.Errorf("the answer lacks %q:\n%.3000s", w, answer)
		}
	}
	if strings.Contains(answer, "more problems are not listed") && problems.Count() <= len(problems) {
		t.Errorf("the problems left out are not counted (Count %d, listed %d)", problems.Count(), len(problems))
	}
	for _, p := range problems {
		if len(p.Error)+len(p.Fix) > 2*maxTextBytes+16 {
			t.Errorf("a problem of %d bytes: %.200s", len(p.Error)+len(p.Fix), p.Error)
		}
	}
}

func TestDuplicateDependencyIsRejected(t *testing.T) {
	d := validDoc()
	d["userStories"].([]any)[2].(map[string]any)["dependsOn"] = []any{"US-001", "US-002", "US-001"}
	data, _ := json.Marshal(d)
	_, problems, _ := Check(data)
	if len(problems) != 1 || problems[0].Field != "dependsOn" || !strings.Contains(problems[0].Error, `US-003.dependsOn lists "US-001" more than once (2 times)`) {
		t.Fatalf("problems: %v", problems)
	}
}

// TestLongValuesAreCutInMessages: a megabyte-long value quoted in a message
// is cut short.
func TestLongValuesAreCutInMessages(t *testing.T) {
	d := validDoc()
	d["userStories"].([]any)[0].(map[string]any)["dependsOn"] = []any{strings.Repeat("x", 1<<20)}
	d["userStories"].([]any)[1].(map[string]any)["status"] = strings.Repeat("s", 1<<20)
	data, _ := json.Marshal(d)
	_, problems, _ := Check(data)
	if len(problems) != 2 || len(problems.Error()) > 4*maxTextBytes {
		t.Fatalf("%d problems, %d bytes", len(problems), len(problems.Error()))
	}
}
