// Package taskfiletest makes task files for tests: valid ones and hostile
// ones. It is for tests only.
package taskfiletest

import (
	"fmt"
	"strings"
)

// HostileGraph is a task file of n stories (n <= 1000) in a chain, each
// depending on the next, where every story also lists the first one dups
// times: every such entry is a back edge of a depth-first walk, at every
// depth. 1000 stories with 60 repeats make 0.7 MB.
func HostileGraph(n, dups int) []byte {
	var b strings.Builder
	b.WriteString(`{"schemaVersion":"3.0","metadata":{"title":"t","type":"feat","branchName":"feat/hostile","createdAt":"2026-01-02"},"userStories":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"US-%03d","title":"t","description":"d","acceptanceCriteria":["Typecheck passes"],"priority":%d,"status":"pending","dependsOn":[`, i, i)
		deps := make([]string, 0, dups+1)
		if i+1 < n {
			deps = append(deps, fmt.Sprintf(`"US-%03d"`, i+1))
		}
		for range dups {
			deps = append(deps, `"US-000"`)
		}
		b.WriteString(strings.Join(deps, ","))
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}
