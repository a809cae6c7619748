package board

import (
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/attempts"
)

// attemptSetJSON is a task file run several times (best of N), as the
// page groups it: the status line, then its attempts, the picked one
// marked.
type attemptSetJSON struct {
	TaskFile string        `json:"taskFile"`
	Line     string        `json:"line"`
	Attempts []attemptJSON `json:"attempts"`
}

type attemptJSON struct {
	Attempt   int    `json:"attempt"`
	Container string `json:"container"`
	Picked    bool   `json:"picked"`
	Qualified bool   `json:"qualified"`
	KeptRef   string `json:"keptRef"`
}

// boardAttempts is v's attempts for the page, cleaned; picked names each
// attempt's container and whether it is its task file's pick.
func boardAttempts(v api.SwarmView) (sets []attemptSetJSON, picked map[string]bool) {
	sets, picked = []attemptSetJSON{}, map[string]bool{}
	for _, set := range v.Attempts {
		s := attemptSetJSON{TaskFile: clean(set.TaskFilePath, maxText), Line: clean(attempts.Line(set), maxText), Attempts: []attemptJSON{}}
		for _, a := range set.Attempts {
			win := set.Pick != nil && set.Pick.ContainerName == a.ContainerName
			picked[a.ContainerName] = win
			s.Attempts = append(s.Attempts, attemptJSON{Attempt: a.Attempt, Container: clean(a.ContainerName, maxTitle),
				Picked: win, Qualified: a.Qualified, KeptRef: clean(a.KeptRef, maxText)})
		}
		sets = append(sets, s)
	}
	return sets, picked
}
