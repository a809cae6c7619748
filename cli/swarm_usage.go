package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage/fold"
)

// UsageTotals, StoryUsage and ContainerUsage are what `aimi swarm usage`
// reports: the journal's fold (package fold), which the daemon shows
// beside a land's branches too.
type (
	UsageTotals    = fold.Totals
	StoryUsage     = fold.Story
	ContainerUsage = fold.Container
)

// UsageReport is `aimi swarm usage --json`.
type UsageReport struct {
	Containers []ContainerUsage `json:"containers"`
	Total      UsageTotals      `json:"total"`
	// Attempts are the totals of each task file run several times (its
	// attempts are containers above).
	Attempts []AttemptsUsage `json:"attempts,omitempty"`
}

func newSwarmUsageCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage [NAME]",
		Short: "model calls, tokens and cost per container and story, with totals",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				rep, err := Usage(cmd.Context(), client, repo, args)
				if err != nil {
					return err
				}
				if asJSON {
					return writeIndented(s.Out, rep)
				}
				printUsage(s.Out, rep)
				return nil
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// Usage is `aimi swarm usage [NAME]`'s report: the model calls of the
// named containers (none named: every container of the swarm), read from
// their journals. Its errors are the command's.
func Usage(ctx context.Context, client *daemon.Client, repo string, names []string) (UsageReport, error) {
	view, err := client.Status(ctx, repo)
	if err != nil {
		return UsageReport{}, swarmErr(err)
	}
	rep := UsageReport{Containers: []ContainerUsage{}}
	for _, name := range usageNames(view, names) {
		f := fold.New()
		err := client.Logs(ctx, api.LogsRequest{RepoPath: repo, Name: name}, func(r state.Record) error {
			f.Add(r)
			return nil
		})
		if err := endOfStream(ctx, err); err != nil {
			return UsageReport{}, swarmErr(err)
		}
		cu := f.Result(name)
		rep.Containers = append(rep.Containers, cu)
		rep.Total.Add(cu.Totals)
	}
	rep.Attempts = attemptsUsage(view, rep.Containers)
	return rep, nil
}

func usageNames(v api.SwarmView, args []string) []string {
	if len(args) > 0 {
		return args
	}
	var names []string
	if v.State != nil {
		for _, c := range v.State.Containers {
			names = append(names, c.ContainerName)
		}
	}
	return names
}

func printUsage(w io.Writer, rep UsageReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CONTAINER / STORY\tCALLS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST\t")
	row := func(label string, t UsageTotals) {
		cost := fmt.Sprintf("%.4f", t.Cost)
		for cur, a := range t.AgentCost {
			if cur != "USD" {
				cost += fmt.Sprintf(" + %.4f %s", a, cur)
			}
		}
		if len(t.AgentCost) > 0 {
			cost += " (agent)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", label, t.Calls, t.Tokens.Input, t.Tokens.Output, t.Tokens.CacheRead, t.Tokens.CacheWrite, cost)
	}
	for _, c := range rep.Containers {
		row(oneLine(c.Name, 60), c.Totals)
		for _, st := range c.Stories {
			label := "  " + oneLine(st.Story, 40)
			if st.Story == "" {
				label = "  (no single story)"
			}
			row(label, st.Totals)
		}
	}
	for _, a := range rep.Attempts {
		row(fmt.Sprintf("%s (%d attempts)", oneLine(a.Branch, 50), len(a.Containers)), a.UsageTotals)
	}
	row("TOTAL", rep.Total)
	tw.Flush()
}
