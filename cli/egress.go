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
	printRefused(w, v, "Egress refused", func(c api.ContainerDetail) int { return c.EgressDenied })
}

// printGitRefused counts, per container, the requests the git service
// refused it; `aimi swarm logs NAME` has each one (git-refused).
func printGitRefused(w io.Writer, v api.SwarmView) {
	printRefused(w, v, "Git requests refused", func(c api.ContainerDetail) int { return c.GitRefused })
}

// printRefused lists the containers whose count is not 0 under title.
func printRefused(w io.Writer, v api.SwarmView, title string, count func(api.ContainerDetail) int) {
	width := 0
	for _, c := range v.Containers {
		if count(c) > 0 {
			width = max(width, len(c.Name))
		}
	}
	if width == 0 {
		return
	}
	fmt.Fprintln(w, title+" (aimi swarm logs NAME shows each):")
	for _, c := range v.Containers {
		if n := count(c); n > 0 {
			fmt.Fprintf(w, "  %-*s  %d\n", width, c.Name, n)
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
