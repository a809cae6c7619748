package cli

import (
	"fmt"
	"io"
	"time"

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

// printLimitWaits says which containers' model calls wait at the model
// gateway now, and for what: a provider's limit until its reset, or a
// place under max_concurrent or requests_per_minute.
func printLimitWaits(w io.Writer, v api.SwarmView) {
	width := 0
	for _, c := range v.Containers {
		if len(c.LimitWaits) > 0 {
			width = max(width, len(c.Name))
		}
	}
	if width == 0 {
		return
	}
	fmt.Fprintln(w, "Model calls waiting at the gateway:")
	for _, c := range v.Containers {
		for _, lw := range c.LimitWaits {
			fmt.Fprintf(w, "  %-*s  %s (%d call(s), since %s)\n", width, c.Name, oneLine(lw.Text, 200), lw.Calls, lw.Since.Local().Format(time.TimeOnly))
		}
	}
}
