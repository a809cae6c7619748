package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// newSwarmLandCmd is `aimi swarm land`: the swarm's work as one branch.
func newSwarmLandCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var onto, order string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "land",
		Short: "merge the swarm's completed branches into one integration branch, aimi/land/<swarm>",
		Long: `Start the integration branch aimi/land/<swarm id, first 8> at --onto (default:
the branch checked out in your checkout) and merge each completed container's
branch into it, one merge commit each ("Land <task file>: <title>", its stories
in the body), in the --order given (container names, comma-separated), then in
the order the containers completed. The merges happen in the daemon's own
repository, never in your checkout. A branch that would conflict with what
landed before it is held: left out with the files, its commits kept, and the
rest go on. The integration branch is then brought into your checkout; your
branch is never moved: the command to take the work is printed. In remote git
mode (--onto's default: origin's default branch) the branches are fetched from
origin, and the integration branch is pushed there (never forced) with one
pull request onto --onto when the daemon has a publish token; without one the
page that opens it is printed.

A land cut short (the daemon killed, or this command interrupted) merged
nothing twice and lost nothing: run it again once the daemon runs, and it
goes on where it stopped.

Exit status: 0 when every completed branch landed, 1 when one was held, 3
when the daemon could not be reached or went away during the land.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				req := api.LandRequest{RepoPath: repo, Onto: onto}
				if order != "" {
					req.Order = strings.Split(order, ",")
				}
				rep, err := client.Land(cmd.Context(), req)
				if err != nil {
					return landCut(err)
				}
				if err := WriteLand(s.Out, rep, asJSON); err != nil {
					return err
				}
				return LandHeld(rep)
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().StringVar(&onto, "onto", "", "the branch to land on (default: the branch checked out now; remote git mode: origin's default branch)")
	cmd.Flags().StringVar(&order, "order", "", "container names in the order to land them, comma-separated")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// WriteLand prints a land's report, as text or indented JSON.
func WriteLand(w io.Writer, rep api.LandReport, asJSON bool) error {
	if !asJSON {
		printLand(w, rep)
		return nil
	}
	if err := writeIndented(w, rep); err != nil {
		return exitf(ExitUsage, "write: %v", err)
	}
	return nil
}

// writeIndented writes v as JSON indented by two spaces: a command's
// --json answer a person may read too.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// LandHeld is the land command's exit 1 when a branch was held (the
// report says which and why), else nil.
func LandHeld(rep api.LandReport) error {
	for _, r := range rep.Results {
		if r.Outcome == "held" {
			return &ExitError{Code: ExitInvalid}
		}
	}
	return nil
}

func printLand(w io.Writer, rep api.LandReport) {
	fmt.Fprintf(w, "Landing onto %s (%.12s) as %s\n", oneLine(rep.Onto, 120), rep.OntoCommit, oneLine(rep.Branch, 120))
	for _, r := range rep.Results {
		line := fmt.Sprintf("  %-8s %s (%s)", r.Outcome, oneLine(r.Container, 80), oneLine(r.Branch, 120))
		if r.Merge != "" {
			line += fmt.Sprintf(" merge %.12s", r.Merge)
		}
		if r.Verify != "" {
			line += ", verify " + r.Verify
		}
		line += fmt.Sprintf(", cost %.4f", r.Cost)
		if r.RunsCost > 0 {
			line += fmt.Sprintf(" + %.4f in its checks and fix-ups", r.RunsCost)
		}
		fmt.Fprintln(w, line)
		if r.Reason != "" {
			fmt.Fprintf(w, "           %s\n", oneLine(r.Reason, 400))
		}
	}
	for _, k := range rep.Skipped {
		fmt.Fprintf(w, "  skipped  %s: %s\n", oneLine(k.Name, 80), oneLine(k.Reason, 200))
	}
	fmt.Fprintf(w, "The land's own cost (its checks and fix-ups): %.4f\n", rep.Cost)
	switch {
	case rep.Origin != "" && rep.PRURL != "":
		fmt.Fprintf(w, "The landed work is on origin as %s; its pull request onto %s:\n  %s\n", oneLine(rep.Branch, 120), oneLine(rep.Onto, 120), oneLine(rep.PRURL, 300))
	case rep.Origin != "":
		fmt.Fprintf(w, "The landed work is on origin as %s; %s\n", oneLine(rep.Branch, 120), oneLine(rep.Take, 400))
	case rep.Take != "":
		fmt.Fprintf(w, "The landed work is in your checkout as %s. To take it:\n  %s\n", oneLine(rep.Branch, 120), oneLine(rep.Take, 300))
	default:
		fmt.Fprintln(w, "Nothing landed.")
	}
}

// landCut says what to do about a land whose answer never came: the
// daemon went away (or the command was interrupted) in the middle of it.
// Errors the daemon answered, or a daemon never reached, are left as they
// are.
func landCut(err error) error {
	var ae *api.APIError
	if errors.As(err, &ae) || errors.Is(err, daemon.ErrUnreachable) || errors.Is(err, daemon.ErrSocketPermission) {
		return err
	}
	const again = "nothing was merged twice or lost: run 'aimi swarm land' again (once aimid runs) and it goes on where it stopped"
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("interrupted: the land stopped where it was; %s", again)}
	}
	return &ExitError{Code: ExitDaemon, Err: fmt.Errorf("the land was cut short: %w; %s", err, again)}
}

// printLandLine sums the swarm's last land up under the status table.
func printLandLine(w io.Writer, rep *api.LandReport) {
	if rep == nil {
		return
	}
	counts := map[string]int{}
	for _, r := range rep.Results {
		counts[r.Outcome]++
	}
	var parts []string
	for _, o := range []string{"landed", "fixed", api.LandVerifying, api.LandFixing, "held"} {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing landed yet"}
	}
	state := "last land"
	switch {
	case rep.Running:
		state = "land running"
	case rep.Cut:
		state = "land cut short: 'aimi swarm land' goes on where it stopped"
	}
	pr := ""
	if rep.PRURL != "" {
		pr = "; pull request " + oneLine(rep.PRURL, 300)
	}
	fmt.Fprintf(w, "Land (%s): onto %s as %s: %s%s\n", state, oneLine(rep.Onto, 120), oneLine(rep.Branch, 120), strings.Join(parts, ", "), pr)
}
