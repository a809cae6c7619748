package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aimi-tools/swarm/state"
)

// renderStatusTable is a stand-in until the state issue's RenderStatus
// (status.go) lands; then renderSwarmView calls that and this file goes.
func renderStatusTable(w io.Writer, s *state.Swarm) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tSTATUS\tBRANCH\tSTORIES\tPR")
	for _, c := range s.Containers {
		pr := "-"
		if c.PRURL != nil {
			pr = *c.PRURL
		}
		p := c.StoryProgress
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", c.ContainerName, c.Status, c.BranchName, p.Completed, p.Total, pr)
	}
	tw.Flush()
}
