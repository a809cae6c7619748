package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// newSwarmFetchCmd is `aimi swarm fetch`: the way back to work a container
// committed but could not push (its completion says GIT_PUSH_FAILED and
// names this command; cleanup keeps such containers).
func newSwarmFetchCmd(s Streams) *cobra.Command {
	var t swarmTarget
	cmd := &cobra.Command{
		Use:   "fetch [NAME...]",
		Short: "copy the branches finished containers could not push out of the containers into your checkout",
		Long: `For each finished container (all of the swarm's without names; a name may also
be a container of an earlier swarm that cleanup kept) whose branch holds commits
nobody received, read the branch out of the container itself. Local git mode:
add it to the swarm's repository and bring it into your checkout (a fast-forward
only) as a received branch is. Remote git mode: fetch it into your checkout as
refs/aimi/kept/<swarm>/<name> and push it to origin's branch (the ref is dropped
once origin has it). Containers with nothing unreceived are listed as skipped.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				rep, err := client.Fetch(cmd.Context(), repo, names)
				if err != nil {
					return err
				}
				printFetch(s.Out, rep)
				return nil
			})
		},
	}
	t.addFlags(cmd)
	return cmd
}

func printFetch(w io.Writer, rep api.FetchReport) {
	for _, f := range rep.Fetched {
		if f.Ref != "" {
			fmt.Fprintf(w, "fetched %s: branch %s's commits at %.12s are in your checkout as %s\n", f.Name, f.Branch, f.Tip, f.Ref)
		} else {
			fmt.Fprintf(w, "fetched %s: branch %s at %.12s is in your checkout\n", f.Name, f.Branch, f.Tip)
		}
		if f.Note != "" {
			fmt.Fprintf(w, "  %s\n", f.Note)
		}
		if f.PRURL != nil {
			fmt.Fprintf(w, "  pull request %s\n", *f.PRURL)
		}
	}
	for _, k := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", k.Name, k.Reason)
		for _, c := range k.Commits {
			fmt.Fprintf(w, "  unreceived commit %s\n", c)
		}
	}
	if len(rep.Fetched) == 0 && len(rep.Skipped) == 0 {
		fmt.Fprintln(w, "fetched: none (no finished container)")
	}
}
