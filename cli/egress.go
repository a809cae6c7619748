package cli

import (
	"fmt"
	"io"

	"github.com/aimi-tools/swarm/api"
)

// printEgressDenied counts, per container, the requests the egress proxy
// refused it; `aimi swarm logs NAME` has each one (egress-denied).
func printEgressDenied(w io.Writer, v api.SwarmView) {
	width := 0
	for _, c := range v.Containers {
		if c.EgressDenied > 0 {
			width = max(width, len(c.Name))
		}
	}
	if width == 0 {
		return
	}
	fmt.Fprintln(w, "Egress refused (aimi swarm logs NAME shows each):")
	for _, c := range v.Containers {
		if c.EgressDenied > 0 {
			fmt.Fprintf(w, "  %-*s  %d\n", width, c.Name, c.EgressDenied)
		}
	}
}
