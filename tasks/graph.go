package tasks

import (
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
)

// graph checks the dependency references (known, not repeated, not the
// story itself) and that they form a DAG. It costs O(stories + edges) and
// spells out at most maxCycles cycles.
func (c *checker) graph(infos []storyInfo, index map[string]int) {
	edges := make([][]int, len(infos)) // story -> stories it depends on
	for i, s := range infos {
		if s.id == "" {
			continue
		}
		times := make(map[string]int, len(s.dependsOn))
		for _, dep := range s.dependsOn {
			times[dep]++
		}
		for _, dep := range s.dependsOn {
			n := times[dep]
			if n == 0 {
				continue // a repeat, reported at its first occurrence
			}
			times[dep] = 0
			if n > 1 {
				c.add(s.id, "dependsOn", fmt.Sprintf("%s.dependsOn lists %q more than once (%d times).", s.id, cut(dep, 40), n),
					fmt.Sprintf("Keep one %q in %s.dependsOn.", cut(dep, 40), s.id))
			}
			switch j, known := index[dep]; {
			case dep == s.id:
				c.add(s.id, "dependsOn", fmt.Sprintf("%s.dependsOn references %s itself.", s.id, s.id),
					fmt.Sprintf("Remove %q from %s.dependsOn.", dep, s.id))
			case !acpmsg.ValidStoryID(dep):
				c.add(s.id, "dependsOn", fmt.Sprintf("%s.dependsOn entry %q is not a story id (%s).", s.id, cut(dep, 40), acpmsg.PatternStoryID),
					fmt.Sprintf("Replace %q in %s.dependsOn with the id of an existing story, e.g. \"US-001\".", cut(dep, 40), s.id))
			case !known:
				c.add(s.id, "dependsOn", fmt.Sprintf("%s.dependsOn references %q which does not exist.", s.id, dep),
					fmt.Sprintf("Remove %q from %s.dependsOn or add a story with id %q.", dep, s.id, dep))
			default:
				edges[i] = append(edges[i], j)
			}
		}
	}
	cycles, more := findCycles(edges, maxCycles)
	for _, cycle := range cycles {
		names := make([]string, 0, min(len(cycle), maxCycleIDs+1))
		for k, i := range cycle {
			if len(cycle) > maxCycleIDs && k == maxCycleIDs-2 {
				names = append(names, fmt.Sprintf("... (%d more)", len(cycle)-maxCycleIDs))
				continue
			}
			if len(cycle) > maxCycleIDs && k > maxCycleIDs-2 && k < len(cycle)-1 {
				continue
			}
			names = append(names, infos[i].id)
		}
		from, to := infos[cycle[0]].id, infos[cycle[1]].id
		c.add(from, "dependsOn", "dependency cycle "+strings.Join(names, " -> ")+".",
			fmt.Sprintf("Remove one dependency of the cycle, e.g. %q from %s.dependsOn, so that the stories form a DAG.", to, from))
	}
	if more > 0 {
		c.add("", "dependsOn", fmt.Sprintf("%d more dependencies close a cycle; they are not spelt out.", more),
			"Break the cycles above and validate the file again to see the rest.")
	}
}

// findCycles walks the graph depth first in file order. For the first
// limit back edges it returns the cycle each closes, as a closed path
// (first node repeated at the end); more counts the back edges after those.
// Only reported cycles copy the walk's path, so the cost stays linear in
// the graph whatever its number of back edges.
func findCycles(edges [][]int, limit int) (cycles [][]int, more int) {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(edges))
	var stack []int
	var visit func(int)
	visit = func(n int) {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range edges[n] {
			switch color[m] {
			case white:
				visit(m)
			case grey:
				if len(cycles) >= limit {
					more++
					continue
				}
				start := len(stack) - 1
				for stack[start] != m {
					start--
				}
				cycles = append(cycles, append(append([]int{}, stack[start:]...), m))
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for n := range edges {
		if color[n] == white {
			visit(n)
		}
	}
	return cycles, more
}
