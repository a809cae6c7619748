package cli

import (
	"slices"

	"github.com/aimi-tools/swarm/api"
)

// AttemptsUsage is what a task file run several times spent: its
// attempts' calls together.
type AttemptsUsage struct {
	TaskFile   string   `json:"taskFile"`
	Branch     string   `json:"branch"`
	Containers []string `json:"containers"`
	UsageTotals
}

// attemptsUsage sums the usage of each task file's attempts among the
// containers reported (those a NAME argument left out count nothing).
func attemptsUsage(v api.SwarmView, cs []ContainerUsage) []AttemptsUsage {
	var out []AttemptsUsage
	for _, set := range v.Attempts {
		a := AttemptsUsage{TaskFile: set.TaskFilePath, Branch: set.BranchName, Containers: []string{}}
		for _, at := range set.Attempts {
			i := slices.IndexFunc(cs, func(c ContainerUsage) bool { return c.Name == at.ContainerName })
			if i < 0 {
				continue
			}
			a.Containers = append(a.Containers, at.ContainerName)
			a.Add(cs[i].Totals)
		}
		if len(a.Containers) > 0 {
			out = append(out, a)
		}
	}
	return out
}
