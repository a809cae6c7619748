package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/termsafe"
	"github.com/aimi-tools/swarm/state"
)

// newSwarmPickCmd is `aimi swarm pick NAME`: the attempt NAME becomes its
// task file's pick instead of the daemon's.
func newSwarmPickCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pick NAME",
		Short: "make the attempt NAME its task file's pick (best of N)",
		Long: `Pick the attempt NAME (a container of a task file run with --attempts) instead
of the daemon's pick. Before the task file's branch landed, the branch moves
from the attempt picked before to NAME's commits (only if it still holds that
attempt's tip: your own commits there are never dropped). After it landed,
nothing landed is rewritten: NAME is landed instead. Every attempt's commits
stay at refs/aimi/attempts/<swarm>/<container>. See docs/attempts.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				v, err := client.Pick(cmd.Context(), repo, args[0])
				if err != nil {
					return swarmErr(err)
				}
				if asJSON {
					return writeIndented(s.Out, v)
				}
				printAttempts(s.Out, v)
				return nil
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the swarm view as JSON")
	return cmd
}

// printAttempts shows each task file run several times: its pick line,
// then its attempts, the picked one marked, each with where its commits
// are kept.
func printAttempts(w io.Writer, v api.SwarmView) {
	if len(v.Attempts) == 0 {
		return
	}
	status := map[string]string{}
	for _, c := range v.Containers {
		status[c.Name] = c.Status
	}
	fmt.Fprintln(w, "Attempts:")
	for _, set := range v.Attempts {
		fmt.Fprintf(w, "  %s\n", termsafe.String(attempts.Line(set)))
		for _, a := range set.Attempts {
			mark := " "
			if set.Pick != nil && set.Pick.ContainerName == a.ContainerName {
				mark = "*"
			}
			var facts []string
			if a.Variant != "" {
				facts = append(facts, "variant "+a.Variant)
			}
			if a.Qualified {
				facts = append(facts, "verified")
			}
			if a.Score != nil {
				facts = append(facts, fmt.Sprintf("score %g", *a.Score))
			}
			if a.Lines != nil {
				facts = append(facts, attempts.Thousands(*a.Lines)+" lines")
			}
			if a.StoppedEarly {
				facts = append(facts, "stopped once another qualified")
			}
			switch {
			case a.KeptRef != "":
				facts = append(facts, "kept at "+a.KeptRef)
			case a.Tip != "":
				// Remote git mode: the attempt's branch is on origin, the
				// checkout keeps no ref of it.
				facts = append(facts, "on origin at "+a.BranchName)
			}
			fmt.Fprintf(w, "   %s %-28s %-10s %s\n", mark, termsafe.String(a.ContainerName), status[a.ContainerName], termsafe.String(strings.Join(facts, ", ")))
		}
	}
}

// withoutLosers is v's state without the attempts another attempt of
// their task file was picked over.
func withoutLosers(v api.SwarmView) *state.Swarm {
	if v.State == nil || len(v.Attempts) == 0 {
		return v.State
	}
	lost := map[string]bool{}
	for _, set := range v.Attempts {
		if set.Pick == nil || set.Pick.ContainerName == "" {
			continue
		}
		for _, a := range set.Attempts {
			lost[a.ContainerName] = a.ContainerName != set.Pick.ContainerName
		}
	}
	out := *v.State
	out.Containers = slices.DeleteFunc(slices.Clone(v.State.Containers), func(c *state.Container) bool { return lost[c.ContainerName] })
	return &out
}
